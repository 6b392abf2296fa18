package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/certs"
	"github.com/azure-ccm/azure-ccm/internal/azsim/client"
	"github.com/azure-ccm/azure-ccm/internal/azsim/compute"
	"github.com/azure-ccm/azure-ccm/internal/azsim/control"
	"github.com/azure-ccm/azure-ccm/internal/azsim/drift"
	"github.com/azure-ccm/azure-ccm/internal/azsim/identity"
	"github.com/azure-ccm/azure-ccm/internal/azsim/imds"
	"github.com/azure-ccm/azure-ccm/internal/azsim/middleware"
	"github.com/azure-ccm/azure-ccm/internal/azsim/network"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
)

// Server is a running azsim.
type Server struct {
	opts     Options
	engine   *arm.Engine
	mw       *middleware.Middleware
	identity *identity.Service
	imds     *imds.Server
	bundle   *certs.Bundle
	files    certs.Files
	tmpDir   string
	envFile  string

	httpsSrv, imdsSrv *http.Server
	url, imdsURL      string
	client            *client.Client

	seedResult *topology.Result

	closeOnce sync.Once
	closeErr  error
}

// registerTypes installs every resource type the engine serves.
var registerTypes = []func(*arm.Engine){network.Register, func(e *arm.Engine) { compute.Register(e) }}

// Start builds and starts azsim. Cancel ctx or call Close to stop it.
func Start(ctx context.Context, opts Options) (*Server, error) {
	opts = withDefaults(opts)
	s := &Server{opts: opts}
	ok := false
	defer func() {
		if !ok {
			_ = s.shutdown(false) // the start-up error is the one to report
		}
	}()

	dir := opts.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "azsim-")
		if err != nil {
			return nil, err
		}
		dir, s.tmpDir = d, d
	}
	b, err := certs.Generate(opts.ExtraNames...)
	if err != nil {
		return nil, err
	}
	s.bundle = b
	if s.files, err = b.WriteFiles(dir); err != nil {
		return nil, err
	}

	st, err := loadState(opts.StateFile)
	if err != nil {
		return nil, err
	}
	key := st.TokenKey
	if len(key) == 0 {
		key = processTokenKey()
	}
	issuer := identity.NewIssuer(key)
	issuer.Lifetime = opts.TokenLifetime
	s.identity, err = identity.New(*opts.Credentials, issuer)
	if err != nil {
		return nil, err
	}
	s.identity.CloudName = opts.CloudName

	s.engine = arm.NewEngine(arm.Config{
		LRODuration:    opts.LRODuration,
		PollRetryAfter: opts.PollRetryAfter,
		PageSize:       opts.PageSize,
		// The middleware authenticates (so refusals are counted and carry ARM's codes); the
		// engine is also called in-process by seeding and IMDS, which carry no token.
		Authorize: func(*http.Request) error { return nil },
	})
	for _, reg := range registerTypes {
		reg(s.engine)
	}
	s.engine.AddRoute(matchGenericList, genericList(s.engine))
	if len(st.Engine) > 0 {
		if err := s.engine.Restore(st.Engine); err != nil {
			return nil, fmt.Errorf("azsim: restoring %s: %w", opts.StateFile, err)
		}
	}

	s.mw = middleware.New(s.engine, middleware.Options{
		Authorize: s.identity.Authorize,
		Latency:   opts.Latency,
		Throttle:  *opts.Throttle,
		Seed:      opts.FaultSeed,
		LRO:       lroHook,
		// One counter row per type, whatever case clients spell it in.
		CanonicalType: s.engine.CanonicalType,
	})
	s.imds = imds.New(s.engine)
	s.imds.TokenHandler = s.identity.IMDSTokenHandler()
	s.imds.SetDefaultVM(st.IMDSDefaultVM)

	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("azsim: listening on %s: %w", opts.Addr, err)
	}
	s.url = "https://" + urlHost(ln.Addr().(*net.TCPAddr))
	s.issuerAudiences()
	if err := s.writeEnvironmentFile(dir); err != nil {
		return nil, err
	}
	s.httpsSrv = &http.Server{
		Handler:           s.mainHandler(),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{b.TLS}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 30 * time.Second,
	}
	go func() { _ = s.httpsSrv.ServeTLS(ln, "", "") }()

	if opts.IMDSAddr != "off" {
		iln, err := net.Listen("tcp", opts.IMDSAddr)
		if err != nil {
			return nil, fmt.Errorf("azsim: IMDS listening on %s: %w", opts.IMDSAddr, err)
		}
		s.imdsURL = "http://" + urlHost(iln.Addr().(*net.TCPAddr))
		mux := http.NewServeMux()
		mux.Handle("/msi/token", s.identity.AppServiceTokenHandler())
		mux.Handle("/", s.imds)
		s.imdsSrv = &http.Server{Handler: limitBodies(mux, maxLoginBody), ReadHeaderTimeout: 30 * time.Second}
		go func() { _ = s.imdsSrv.Serve(iln) }()
	}

	s.client, err = client.New(s.url, s.files.CA)
	if err != nil {
		return nil, err
	}
	if opts.Topology != nil {
		if s.seedResult, err = s.Seed(ctx, opts.Topology); err != nil {
			return nil, err
		}
	}
	go func() {
		<-ctx.Done()
		_ = s.Close()
	}()
	ok = true
	s.logf("azsim ready url=%s imds=%s ca=%s", s.url, s.imdsURL, s.files.CA)
	return s, nil
}

func withDefaults(o Options) Options {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.IMDSAddr == "" {
		o.IMDSAddr = "127.0.0.1:0"
	}
	if o.Credentials == nil {
		c := DefaultCredentials()
		o.Credentials = &c
	}
	if o.SubscriptionID == "" {
		o.SubscriptionID = topology.DefaultSubscriptionID
	}
	if o.Location == "" {
		o.Location = topology.DefaultLocation
	}
	if o.CloudName == "" {
		o.CloudName = "AzureCloud"
	}
	if o.TokenLifetime <= 0 {
		o.TokenLifetime = time.Hour
	}
	if o.Throttle == nil {
		t := middleware.DefaultThrottle()
		o.Throttle = &t
	}
	return o
}

// urlHost names a listener address the way clients should dial it; unspecified addresses
// become localhost (which the certificate covers).
func urlHost(a *net.TCPAddr) string {
	host := a.IP.String()
	if a.IP.IsUnspecified() {
		host = "localhost"
	}
	return net.JoinHostPort(host, fmt.Sprint(a.Port))
}

// issuerAudiences accepts the public-cloud ARM audiences and azsim's own URL.
func (s *Server) issuerAudiences() {
	auds := append([]string{}, identity.DefaultAudiences...)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(s.url, "https://"))
	auds = append(auds, s.url)
	for _, h := range append([]string{"localhost", "127.0.0.1", "[::1]"}, s.opts.ExtraNames...) {
		auds = append(auds, "https://"+h+":"+port)
	}
	s.identity.Issuer.Audiences = auds
}

func lroHook(r *http.Request, d *time.Duration, failCode, failMessage string) *http.Request {
	o := arm.LROOptions{Duration: d}
	if failCode != "" {
		o.Fail = &arm.Error{Code: failCode, Message: failMessage}
	}
	return r.WithContext(arm.WithLROOptions(r.Context(), o))
}

// instant makes the operations of in-process requests (seeding, VM actions) finish at once.
func instant(r *http.Request) *http.Request {
	zero := time.Duration(0)
	return r.WithContext(arm.WithLROOptions(r.Context(), arm.LROOptions{Duration: &zero}))
}

func (s *Server) mainHandler() http.Handler {
	mux := http.NewServeMux()
	s.identity.Register(mux)
	api := &control.API{
		Engine:           s.engine,
		Middleware:       s.mw,
		Seed:             s.Seed,
		Reset:            s.Reset,
		VMAction:         s.VMAction,
		ConnectionAction: s.ConnectionAction,
		Drift:            s.Drift,
		SetDefaultVM:     s.imds.SetDefaultVM,
		DefaultVM:        s.imds.DefaultVM,
		Info:             s.Info,
		Logins:           s.identity.Logins,
		ResetLogins:      s.identity.ResetLogins,
	}
	api.Register(mux)
	// The subscription list (az login, azidentity-free tools) is answered here: the engine only
	// knows resources inside subscriptions.
	mux.Handle("GET /subscriptions", s.authorized(http.HandlerFunc(s.listSubscriptions)))
	mux.Handle("/", s.mw)
	// The login endpoints read their form before any credential is checked: their bodies are
	// bounded by maxLoginBody. The same routes registered alone tell which requests are theirs.
	logins := http.NewServeMux()
	s.identity.Register(logins)
	loginLimited, anyLimited := limitBodies(mux, maxLoginBody), limitBodies(mux, maxAnyBody)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := logins.Handler(r); pattern != "" {
			loginLimited.ServeHTTP(w, r)
			return
		}
		anyLimited.ServeHTTP(w, r)
	})
}

// maxAnyBody bounds every request body on the HTTPS listener (the control API's topology seeds
// are the largest); the ARM API has its own, smaller limit (middleware.DefaultMaxBodyBytes).
const maxAnyBody = 16 << 20

// maxLoginBody bounds the bodies of the unauthenticated login and identity endpoints (a token
// request is a form of a few KB) and of the IMDS listener.
const maxLoginBody = 1 << 20

// limitBodies answers 413 to announced bodies over limit and stops reading others there.
func limitBodies(next http.Handler, limit int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			w.Header().Set("Connection", "close")
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "RequestContentTooLarge",
				"message": fmt.Sprintf("The request content size exceeds the maximum of %d bytes.", limit)}})
			return
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, limit)
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) authorized(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.identity.Authorize(r); err != nil {
			var ae *identity.AuthError
			if errors.As(err, &ae) {
				ae.WriteTo(w)
				return
			}
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Server) listSubscriptions(w http.ResponseWriter, r *http.Request) {
	claims, err := s.identity.Claims(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	creds := s.identity.Credentials()
	subs := map[string]bool{strings.ToLower(s.opts.SubscriptionID): true}
	for sub := range creds.SubscriptionTenants {
		subs[strings.ToLower(sub)] = true
	}
	for _, rg := range s.engine.ListResources("Microsoft.Resources/resourceGroups") {
		var doc struct{ ID string }
		if json.Unmarshal(rg, &doc) == nil {
			if parts := strings.Split(doc.ID, "/"); len(parts) > 2 {
				subs[strings.ToLower(parts[2])] = true
			}
		}
	}
	ids := make([]string, 0, len(subs))
	for id := range subs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var value []map[string]any
	for _, id := range ids {
		// As in Azure, a token lists the subscriptions of its own tenant.
		tenant := creds.TenantOf(id)
		if !strings.EqualFold(tenant, claims.TenantID) {
			continue
		}
		value = append(value, map[string]any{
			"id": "/subscriptions/" + id, "subscriptionId": id, "tenantId": tenant,
			"displayName": "azsim " + id, "state": "Enabled", "authorizationSource": "RoleBased",
			"subscriptionPolicies": map[string]any{"locationPlacementId": "Public_2014-09-01", "quotaId": "PayAsYouGo_2014-09-01", "spendingLimit": "Off"},
		})
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(map[string]any{"value": value, "count": map[string]any{"type": "Total", "value": len(value)}})
}

// Seed builds a topology in-process (no counters, no faults) and returns its machines.
// Topologies without subscription or location get the server's.
func (s *Server) Seed(ctx context.Context, t *topology.Topology) (*topology.Result, error) {
	c := *t
	if c.SubscriptionID == "" {
		c.SubscriptionID = s.opts.SubscriptionID
	}
	if c.Location == "" {
		c.Location = s.opts.Location
	}
	res, err := topology.Seed(ctx, s.engine, &c, topology.SeedOptions{Decorate: instant})
	if err != nil {
		return res, err
	}
	for _, m := range res.Machines {
		if sfd := c.SubFaultDomain(m); sfd != "" {
			s.imds.SetSubFaultDomain(m.ResourceID, sfd)
		}
	}
	s.logf("azsim seeded %d machines", len(res.Machines))
	return res, nil
}

// Reset drops every resource, fault rule and counter (logins included), and the IMDS default VM.
func (s *Server) Reset() error {
	s.engine.Reset()
	s.mw.ClearFaults()
	s.mw.ResetStats()
	s.identity.ResetLogins()
	s.imds.SetDefaultVM("")
	s.imds.ResetSubFaultDomains()
	return nil
}

// VMAction acts on a VM or scale set instance through the ARM API, in-process.
func (s *Server) VMAction(ctx context.Context, a control.VMAction) error {
	if a.ID == "" {
		return errors.New("vm action: id is required")
	}
	switch a.Action {
	case "delete":
		return topology.Do(ctx, s.engine, http.MethodDelete, a.ID, topology.ComputeAPIVersion, nil, topology.SeedOptions{Decorate: instant})
	case "deallocate", "powerOff", "start", "restart":
		return topology.Do(ctx, s.engine, http.MethodPost, a.ID+"/"+a.Action, topology.ComputeAPIVersion, nil, topology.SeedOptions{Decorate: instant})
	}
	return fmt.Errorf("vm action %q: use delete, deallocate, powerOff, start or restart", a.Action)
}

// ConnectionAction approves, rejects or removes a private endpoint connection of a private
// link service through the ARM API, in-process (as the service's owner would with
// PrivateLinkServicesClient.UpdatePrivateEndpointConnection / BeginDeletePrivateEndpointConnection).
func (s *Server) ConnectionAction(ctx context.Context, a control.ConnectionAction) error {
	id, err := arm.ParseID(a.ID)
	if err != nil || len(id.Types) != 2 || !strings.EqualFold(id.FullType(), "Microsoft.Network/privateLinkServices/privateEndpointConnections") || id.IsCollection() {
		return fmt.Errorf("private endpoint connection: %q is not a …/privateLinkServices/{service}/privateEndpointConnections/{name} ID", a.ID)
	}
	opts := topology.SeedOptions{Decorate: instant}
	switch strings.ToLower(a.Action) {
	case "approve", "reject":
		status := "Approved"
		if strings.EqualFold(a.Action, "reject") {
			status = "Rejected"
		}
		body := map[string]any{"properties": map[string]any{"privateLinkServiceConnectionState": map[string]any{
			"status": status, "description": a.Description, "actionsRequired": "None"}}}
		return topology.Do(ctx, s.engine, http.MethodPut, a.ID, topology.NetworkAPIVersion, body, opts)
	case "remove":
		return topology.Do(ctx, s.engine, http.MethodDelete, a.ID, topology.NetworkAPIVersion, nil, opts)
	}
	return fmt.Errorf("private endpoint connection action %q: use approve, reject or remove", a.Action)
}

// Drift applies a third party's edit (a rule deleted, a probe changed …) through the ARM
// engine in-process, as another client would: no fault, latency or request counter applies.
func (s *Server) Drift(ctx context.Context, r drift.Request) (drift.Result, error) {
	return drift.Apply(ctx, s.engine, r)
}

// Info describes the server.
func (s *Server) Info() control.Info {
	return control.Info{URL: s.url, IMDSURL: s.imdsURL, CAFile: s.files.CA, SubscriptionID: s.opts.SubscriptionID,
		TenantID: s.opts.Credentials.TenantID, Location: s.opts.Location}
}

// SeedResult is the result of seeding Options.Topology at start (nil without one).
func (s *Server) SeedResult() *topology.Result { return s.seedResult }

// URL is the HTTPS base (ARM, identity, control API), without trailing slash.
func (s *Server) URL() string { return s.url }

// IMDSURL is the plain-HTTP IMDS base ("" when disabled).
func (s *Server) IMDSURL() string { return s.imdsURL }

// CAFile is the PEM file of azsim's CA.
func (s *Server) CAFile() string { return s.files.CA }

// CABundleFile is the system roots plus azsim's CA, for SSL_CERT_FILE.
func (s *Server) CABundleFile() string { return s.files.Bundle }

// Client is a control API client for this server.
func (s *Server) Client() *client.Client { return s.client }

// Engine is the ARM engine (for in-process reads and changes).
func (s *Server) Engine() *arm.Engine { return s.engine }

// Middleware is the ARM front door (faults, latency, throttling, counters).
func (s *Server) Middleware() *middleware.Middleware { return s.mw }

// Identity is the identity service (credentials, token issuer).
func (s *Server) Identity() *identity.Service { return s.identity }

// IMDS is the instance metadata server.
func (s *Server) IMDS() *imds.Server { return s.imds }

// Credentials are the accepted identities.
func (s *Server) Credentials() identity.Credentials { return s.identity.Credentials() }

// TLSConfig trusts azsim's CA (for programmatic clients).
func (s *Server) TLSConfig() *tls.Config {
	return &tls.Config{RootCAs: s.bundle.Pool(), MinVersion: tls.VersionTLS12}
}

// ServerCertificate is azsim's TLS certificate (signed by its CA, valid for localhost,
// 127.0.0.1, ::1 and ExtraNames), for test servers that clients trusting azsim must accept.
func (s *Server) ServerCertificate() tls.Certificate { return s.bundle.TLS }

// HTTPClient is an http.Client that trusts azsim (use it as azcore ClientOptions.Transport).
func (s *Server) HTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = s.TLSConfig()
	return &http.Client{Transport: tr, Timeout: 2 * time.Minute}
}

// Close stops both listeners gracefully and writes the state file.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.shutdown(true) })
	return s.closeErr
}

func (s *Server) shutdown(save bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var errs []error
	for _, srv := range []*http.Server{s.httpsSrv, s.imdsSrv} {
		if srv != nil {
			if err := srv.Shutdown(ctx); err != nil {
				errs = append(errs, err)
				_ = srv.Close()
			}
		}
	}
	if save && s.opts.StateFile != "" && s.engine != nil {
		if err := s.saveState(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.tmpDir != "" {
		_ = os.RemoveAll(s.tmpDir)
	}
	return errors.Join(errs...)
}

func (s *Server) logf(format string, args ...any) {
	if s.opts.Logf != nil {
		s.opts.Logf(format, args...)
	}
}

// state is the state file's content.
type state struct {
	Version       int             `json:"version"`
	Engine        json.RawMessage `json:"engine,omitempty"`
	TokenKey      []byte          `json:"tokenKey,omitempty"`
	IMDSDefaultVM string          `json:"imdsDefaultVM,omitempty"`
}

func loadState(path string) (state, error) {
	if path == "" {
		return state{}, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return state{}, nil
	}
	if err != nil {
		return state{}, err
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return state{}, fmt.Errorf("azsim: state file %s: %w", path, err)
	}
	return st, nil
}

func (s *Server) saveState() error {
	snap, err := s.engine.Snapshot()
	if err != nil {
		return err
	}
	b, err := json.Marshal(state{Version: 1, Engine: snap, TokenKey: s.identity.Issuer.Key(), IMDSDefaultVM: s.imds.DefaultVM()})
	if err != nil {
		return err
	}
	tmp := s.opts.StateFile + ".tmp"
	if err := os.MkdirAll(filepath.Dir(s.opts.StateFile), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, s.opts.StateFile)
}

var (
	tokenKeyOnce sync.Once
	tokenKey     []byte
)

// processTokenKey is the token signing key of every azsim started in this process without a
// state file. Clients in one process share token caches that do not know which azsim issued
// a token: MSAL keeps managed-identity tokens in a process-wide cache keyed by identity and
// resource only, so a second azsim with its own key would refuse the first one's cached
// tokens (401 until they expire). One key per process makes the servers of a process one
// Entra ID, as the cloud is.
func processTokenKey() []byte {
	tokenKeyOnce.Do(func() {
		tokenKey = identity.NewIssuer(nil).Key()
	})
	return append([]byte(nil), tokenKey...)
}
