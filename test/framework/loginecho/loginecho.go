// Package loginecho is a hostile login server for tests: it answers token requests (Entra ID
// client credentials, App Service and IMDS managed identity) with errors that echo the whole
// request back — method, URL, headers and body, so the client secret, the client assertion
// and the federated token — the way a proxy error page or a misbehaving private cloud might. In
// proxy mode it forwards to a real upstream (azsim) instead, so a client can log in for real
// between failures. Tests use it to prove that credentials never reach a log line, an event, a
// metric or an error string.
package loginecho

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// Kind is how a token request is answered.
type Kind string

// Answers to token requests.
const (
	// Proxy forwards to the upstream (a real login).
	Proxy Kind = "proxy"
	// BadSecret is Entra's 401 invalid_client, with the request echoed in the description.
	BadSecret Kind = "bad-secret"
	// BadRequest is a 400 invalid_request echoing the request.
	BadRequest Kind = "bad-request"
	// ServerError is a 500 whose plain-text body is the request.
	ServerError Kind = "server-error"
	// Unavailable is a 503 with a JSON echo (retried by the SDK).
	Unavailable Kind = "unavailable"
	// Malformed is a 200 whose body is an HTML page echoing the request.
	Malformed Kind = "malformed"
	// NoToken is a 200 JSON answer without access_token, echoing the request.
	NoToken Kind = "no-token"
	// Truncated is a 200 JSON answer cut in the middle of an echoed access_token.
	Truncated Kind = "truncated"
)

// FailureKinds are every failing answer.
var FailureKinds = []Kind{BadSecret, BadRequest, ServerError, Unavailable, Malformed, NoToken, Truncated}

// Options configure Start.
type Options struct {
	// Certificate is the server's TLS certificate; nil uses httptest's (trusted by Client()).
	Certificate *tls.Certificate
	// Upstream is the base URL of a real login server and ARM (azsim). Proxy mode, the OpenID
	// configuration and the metadata document need it; without it only failures are served.
	Upstream string
	// UpstreamTransport reaches the upstream (e.g. trusting azsim's CA).
	UpstreamTransport http.RoundTripper
	// TokenLifetime, if set, replaces expires_in (and expires_on) in proxied token answers so
	// that clients come back for a new token soon, and every later ARM call needs one.
	TokenLifetime time.Duration
	// Sensitive are values the test wants echoed (and then checks are never shown); Start
	// counts the failing answers that carried one of them (or a JWT).
	Sensitive []string
}

// Server is a running echo login server.
type Server struct {
	// URL is the server's https base URL, without trailing slash.
	URL string

	opts     Options
	srv      *httptest.Server
	upstream *url.URL
	proxy    *httputil.ReverseProxy

	mu       sync.Mutex
	kinds    []Kind
	next     int
	served   map[Kind]int
	echoed   map[Kind]int
	requests int
	// lastToken is when a proxied token request last got a token.
	lastToken time.Time
	// cert is the certificate served; nil serves httptest's own (trusted only by Client()).
	cert *tls.Certificate
}

var jwtLike = regexp.MustCompile(`eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*`)

// Start serves on 127.0.0.1 in failing mode (every failure kind in turn).
func Start(o Options) (*Server, error) {
	s := &Server{opts: o, kinds: append([]Kind(nil), FailureKinds...), served: map[Kind]int{}, echoed: map[Kind]int{}}
	if o.Upstream != "" {
		u, err := url.Parse(o.Upstream)
		if err != nil {
			return nil, fmt.Errorf("loginecho: upstream: %w", err)
		}
		s.upstream = u
		s.proxy = &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(u)
				// The upstream builds its URLs (issuer, token endpoint) from Host: keep ours so
				// that the client keeps coming here.
				pr.Out.Host = pr.In.Host
			},
			Transport:      o.UpstreamTransport,
			ModifyResponse: s.rewriteLifetime,
		}
	}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.cert = o.Certificate
	// Chosen per connection (GetCertificate is not asked when the client sends no server name,
	// as with an IP address); without a certificate, httptest's own is served.
	s.srv.TLS = &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.cert == nil {
			return nil, nil
		}
		return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*s.cert}}, nil
	}}
	s.srv.StartTLS()
	s.URL = s.srv.URL
	return s, nil
}

// Client trusts the server (with httptest's certificate).
func (s *Server) Client() *http.Client { return s.srv.Client() }

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Fail answers token requests with the given kinds in turn (all failure kinds when none).
func (s *Server) Fail(kinds ...Kind) {
	if len(kinds) == 0 {
		kinds = FailureKinds
	}
	s.mu.Lock()
	s.kinds, s.next = append([]Kind(nil), kinds...), 0
	s.mu.Unlock()
}

// ServeUntrusted makes new connections get httptest's own certificate instead of
// Options.Certificate: to a client trusting only Options.Certificate's issuer, the login server
// is no longer trusted (an intercepting proxy, a server certificate renewed by another CA).
func (s *Server) ServeUntrusted() {
	s.mu.Lock()
	s.cert = nil
	s.mu.Unlock()
	s.srv.CloseClientConnections()
}

// Pass forwards token requests to the upstream.
func (s *Server) Pass() { s.Fail(Proxy) }

// Served counts the token requests answered, by kind.
func (s *Server) Served() map[Kind]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[Kind]int, len(s.served))
	for k, v := range s.served {
		out[k] = v
	}
	return out
}

// EchoedSensitive counts, by kind, the failing answers whose echo carried a sensitive value:
// proof that the client was really exposed to it.
func (s *Server) EchoedSensitive() map[Kind]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[Kind]int, len(s.echoed))
	for k, v := range s.echoed {
		out[k] = v
	}
	return out
}

// Missing lists the failure kinds among want not served yet, sorted.
func (s *Server) Missing(want ...Kind) []string { return s.MissingSince(nil, want...) }

// MissingSince lists the failure kinds among want not served since before (a Served snapshot),
// sorted.
func (s *Server) MissingSince(before map[Kind]int, want ...Kind) []string {
	served := s.Served()
	var out []string
	for _, k := range want {
		if served[k] <= before[k] {
			out = append(out, string(k))
		}
	}
	sort.Strings(out)
	return out
}

func isTokenRequest(r *http.Request) bool {
	p := r.URL.Path
	return (r.Method == http.MethodPost && (strings.HasSuffix(p, "/oauth2/v2.0/token") || strings.HasSuffix(p, "/oauth2/token"))) ||
		p == "/msi/token" || p == "/metadata/identity/oauth2/token"
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/metadata/endpoints":
		s.metadata(w, r)
	case isTokenRequest(r):
		s.token(w, r)
	case s.proxy != nil:
		s.proxy.ServeHTTP(w, r)
	case strings.HasSuffix(r.URL.Path, "/.well-known/openid-configuration"):
		s.openID(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (s *Server) pick() Kind {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.kinds[s.next%len(s.kinds)]
	s.next++
	s.requests++
	s.served[k]++
	return k
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	_ = r.Body.Close()
	kind := s.pick()
	if kind == Proxy {
		if s.proxy == nil {
			http.Error(w, "loginecho: no upstream to proxy to", http.StatusBadGateway)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		s.proxy.ServeHTTP(w, r)
		return
	}
	echo := echoOf(r, body)
	if s.carriesSensitive(echo) {
		s.mu.Lock()
		s.echoed[kind]++
		s.mu.Unlock()
	}
	writeFailure(w, kind, echo)
}

func (s *Server) carriesSensitive(echo string) bool {
	if jwtLike.MatchString(echo) {
		return true
	}
	for _, v := range s.opts.Sensitive {
		if v != "" && (strings.Contains(echo, v) || strings.Contains(echo, url.QueryEscape(v))) {
			return true
		}
	}
	return false
}

// echoOf is the request as text: request line, every header, the body.
func echoOf(r *http.Request, body []byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", r.Method, r.URL.RequestURI())
	keys := make([]string, 0, len(r.Header))
	for k := range r.Header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(r.Header[k], ","))
	}
	b.WriteString("\n")
	b.Write(body)
	return b.String()
}

func writeFailure(w http.ResponseWriter, kind Kind, echo string) {
	jsonAnswer := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	switch kind {
	case BadSecret:
		jsonAnswer(http.StatusUnauthorized, map[string]any{"error": "invalid_client",
			"error_description": "AADSTS7000215: Invalid client secret provided. Request was: " + echo,
			"error_codes":       []int{7000215}, "echo": echo})
	case BadRequest:
		jsonAnswer(http.StatusBadRequest, map[string]any{"error": "invalid_request",
			"error_description": "AADSTS900144: " + echo, "message": echo})
	case ServerError:
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "internal error while handling:\n"+echo)
	case Unavailable:
		w.Header().Set("Retry-After", "0")
		jsonAnswer(http.StatusServiceUnavailable, map[string]any{"error": "temporarily_unavailable", "error_description": echo})
	case Malformed:
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "<html><body><pre>"+echo+"</pre></body></html>")
	case NoToken:
		jsonAnswer(http.StatusOK, map[string]any{"token_type": "Bearer", "expires_in": 3600, "note": echo})
	case Truncated:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		q, _ := json.Marshal(echo)
		_, _ = io.WriteString(w, `{"token_type":"Bearer","expires_in":3600,"access_token":`+string(q[:len(q)/2]))
	}
}

// LastToken is when a proxied token request last got a token (zero if none did): with
// TokenLifetime, no client holds a valid token from here after LastToken()+TokenLifetime.
func (s *Server) LastToken() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastToken
}

// rewriteLifetime shortens proxied token lifetimes (TokenLifetime) and notes when the last token
// went out.
func (s *Server) rewriteLifetime(resp *http.Response) error {
	if resp.StatusCode != http.StatusOK || !isTokenRequest(resp.Request) {
		return nil
	}
	s.mu.Lock()
	s.lastToken = time.Now()
	s.mu.Unlock()
	if s.opts.TokenLifetime <= 0 {
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return err
	}
	var doc map[string]any
	if json.Unmarshal(body, &doc) == nil {
		secs := int64(s.opts.TokenLifetime.Seconds())
		if _, ok := doc["expires_in"].(string); ok { // managed identity answers use strings
			doc["expires_in"] = fmt.Sprint(secs)
			doc["expires_on"] = fmt.Sprint(time.Now().Unix() + secs)
		} else {
			doc["expires_in"] = secs
			delete(doc, "ext_expires_in")
		}
		if b, err := json.Marshal(doc); err == nil {
			body = b
		}
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", fmt.Sprint(len(body)))
	return nil
}

// metadata is the upstream's metadata document with the login endpoint pointing here (ARM
// stays upstream), or a minimal one without upstream.
func (s *Server) metadata(w http.ResponseWriter, r *http.Request) {
	self := s.URL + "/"
	if s.upstream == nil {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode([]map[string]any{{"name": "AzureCloud", "resourceManager": self,
			"authentication": map[string]any{"loginEndpoint": self, "audiences": []string{"https://management.core.windows.net/"}}}})
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, strings.TrimSuffix(s.opts.Upstream, "/")+r.URL.RequestURI(), nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	tr := s.opts.UpstreamTransport
	if tr == nil {
		tr = http.DefaultTransport
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	var doc []map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	for _, e := range doc {
		if auth, ok := e["authentication"].(map[string]any); ok {
			auth["loginEndpoint"] = self
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(doc)
}

// openID is a minimal OpenID configuration (without upstream) pointing the token endpoint here.
func (s *Server) openID(w http.ResponseWriter, r *http.Request) {
	tenant := strings.Split(strings.Trim(r.URL.Path, "/"), "/")[0]
	base := "https://" + r.Host + "/" + tenant
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"issuer": base + "/v2.0", "token_endpoint": base + "/oauth2/v2.0/token",
		"authorization_endpoint": base + "/oauth2/v2.0/authorize", "jwks_uri": base + "/discovery/v2.0/keys",
		"token_endpoint_auth_methods_supported": []string{"client_secret_post", "private_key_jwt"},
		"response_types_supported":              []string{"code"}, "subject_types_supported": []string{"pairwise"},
		"id_token_signing_alg_values_supported": []string{"RS256"}, "tenant_region_scope": "NA",
	})
}

// Host is the server's host:port.
func (s *Server) Host() string {
	u, _ := url.Parse(s.URL)
	return u.Host
}

// Port is the server's TCP port.
func (s *Server) Port() string {
	_, p, _ := net.SplitHostPort(s.Host())
	return p
}
