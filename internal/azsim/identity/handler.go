package identity

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultAudiences are the ARM token audiences of the public cloud, which azsim also accepts.
var DefaultAudiences = []string{"https://management.core.windows.net/", "https://management.azure.com/"}

// Service serves the identity endpoints. Its credentials can be replaced at run time.
type Service struct {
	Issuer *Issuer
	// CloudName is the "name" in /metadata/endpoints (default "AzureCloud").
	CloudName string

	mu    sync.RWMutex
	creds Credentials

	logins loginLog
}

// New returns a Service for creds.
func New(creds Credentials, issuer *Issuer) (*Service, error) {
	if err := creds.Validate(); err != nil {
		return nil, err
	}
	return &Service{Issuer: issuer, CloudName: "AzureCloud", creds: creds}, nil
}

// Credentials returns the current configuration.
func (s *Service) Credentials() Credentials {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.creds
}

// SetCredentials replaces the accepted identities.
func (s *Service) SetCredentials(c Credentials) error {
	if err := c.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	s.creds = c
	s.mu.Unlock()
	return nil
}

// Register adds the identity routes of the HTTPS listener to mux.
func (s *Service) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /{tenant}/v2.0/.well-known/openid-configuration", s.openIDConfig)
	// ADFS-style authorities (the Azure CLI's offline login) ask without "v2.0".
	mux.HandleFunc("GET /{tenant}/.well-known/openid-configuration", s.openIDConfig)
	// The Azure CLI with an ADFS authority ("<host>/adfs" plus tenant "adfs") asks for
	// "/adfs/adfs/.well-known/openid-configuration": answer for the first segment's tenant.
	mux.HandleFunc("GET /{tenant}/{sub}/.well-known/openid-configuration", s.openIDConfig)
	mux.HandleFunc("POST /{tenant}/oauth2/v2.0/token", s.token)
	mux.HandleFunc("POST /{tenant}/oauth2/token", s.token)
	mux.HandleFunc("GET /common/discovery/instance", s.instanceDiscovery)
	mux.HandleFunc("GET /msi/token", s.appServiceToken)
	mux.HandleFunc("GET /metadata/endpoints", s.metadataEndpoints)
}

// BaseURL is the https origin the client used to reach azsim, so that issuer and endpoints
// match the authority host whatever name (localhost, 127.0.0.1, extra SAN) was dialled.
func BaseURL(r *http.Request) string {
	scheme := "https"
	if r.TLS == nil {
		scheme = "http"
	}
	return scheme + "://" + r.Host
}

func (s *Service) openIDConfig(w http.ResponseWriter, r *http.Request) {
	tenant := r.PathValue("tenant")
	if !s.Credentials().tenantServed(tenant) {
		oauthError(w, http.StatusBadRequest, "invalid_tenant", 90002, fmt.Sprintf("Tenant '%s' not found.", tenant))
		return
	}
	base := BaseURL(r) + "/" + tenant
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                base + "/v2.0",
		"authorization_endpoint":                base + "/oauth2/v2.0/authorize",
		"token_endpoint":                        base + "/oauth2/v2.0/token",
		"device_authorization_endpoint":         base + "/oauth2/v2.0/devicecode",
		"end_session_endpoint":                  base + "/oauth2/v2.0/logout",
		"jwks_uri":                              base + "/discovery/v2.0/keys",
		"token_endpoint_auth_methods_supported": []string{"client_secret_post", "private_key_jwt", "client_secret_basic"},
		"response_types_supported":              []string{"code", "id_token", "code id_token", "id_token token"},
		"subject_types_supported":               []string{"pairwise"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"scopes_supported":                      []string{"openid", "profile", "email", "offline_access"},
		"tenant_region_scope":                   "NA",
		"cloud_instance_name":                   r.Host,
	})
}

func (s *Service) instanceDiscovery(w http.ResponseWriter, r *http.Request) {
	tenant := "common"
	if ae := r.URL.Query().Get("authorization_endpoint"); ae != "" {
		if u, err := url.Parse(ae); err == nil {
			if seg := strings.Split(strings.Trim(u.Path, "/"), "/"); len(seg) > 0 && seg[0] != "" {
				tenant = seg[0]
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"tenant_discovery_endpoint": BaseURL(r) + "/" + tenant + "/v2.0/.well-known/openid-configuration",
		"api-version":               "1.1",
		"metadata": []map[string]any{{
			"preferred_network": r.Host,
			"preferred_cache":   r.Host,
			"aliases":           []string{r.Host},
		}},
	})
}

func (s *Service) token(w http.ResponseWriter, r *http.Request) {
	tenant := r.PathValue("tenant")
	creds := s.Credentials()
	if !creds.tenantServed(tenant) {
		oauthError(w, http.StatusBadRequest, "invalid_request", 90002, fmt.Sprintf("AADSTS90002: Tenant '%s' not found.", tenant))
		return
	}
	if err := r.ParseForm(); err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			// The listener's body limit stopped the read: the request is too large, not malformed.
			w.Header().Set("Connection", "close")
			oauthError(w, http.StatusRequestEntityTooLarge, "invalid_request", 900144, fmt.Sprintf("the request body is larger than %d bytes", mbe.Limit))
			return
		}
		oauthError(w, http.StatusBadRequest, "invalid_request", 900144, "AADSTS900144: the request body is not a form: "+err.Error())
		return
	}
	f := r.PostForm
	if gt := f.Get("grant_type"); gt != "client_credentials" {
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", 70003, fmt.Sprintf("AADSTS70003: azsim supports only client_credentials, not %q.", gt))
		return
	}
	clientID, secret := f.Get("client_id"), f.Get("client_secret")
	if u, p, ok := r.BasicAuth(); ok && clientID == "" {
		clientID, secret = u, p
	}
	cl, ok := creds.client(clientID)
	if !ok {
		oauthError(w, http.StatusBadRequest, "unauthorized_client", 700016, fmt.Sprintf("AADSTS700016: Application with identifier '%s' was not found in the directory '%s'.", clientID, tenant))
		return
	}
	method := LoginClientSecret
	switch {
	case secret != "":
		if cl.Secret == "" || subtle.ConstantTimeCompare([]byte(secret), []byte(cl.Secret)) != 1 {
			oauthError(w, http.StatusUnauthorized, "invalid_client", 7000215, "AADSTS7000215: Invalid client secret provided.")
			return
		}
	case f.Get("client_assertion") != "":
		method = LoginWorkloadIdentity
		if isCertificateAssertion(f.Get("client_assertion")) {
			method = LoginClientCertificate
		}
		if f.Get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" {
			oauthError(w, http.StatusBadRequest, "invalid_request", 50027, "AADSTS50027: unsupported client_assertion_type.")
			return
		}
		if err := verifyAssertion(cl, f.Get("client_assertion"), s.Issuer.Now); err != nil {
			desc, code := err.Error(), 700027
			if n, ok := aadstsCode(desc); ok {
				code = n
			} else {
				desc = "AADSTS700027: Client assertion failed signature validation or policy: " + desc
			}
			oauthError(w, http.StatusUnauthorized, "invalid_client", code, desc)
			return
		}
	default:
		oauthError(w, http.StatusUnauthorized, "invalid_client", 7000218, "AADSTS7000218: The request body must contain 'client_assertion' or 'client_secret'.")
		return
	}
	resource, ok := resourceFromScope(f.Get("scope"))
	if !ok {
		oauthError(w, http.StatusBadRequest, "invalid_scope", 1002012, "AADSTS1002012: The provided value for scope is not valid. Client credential flows must have a scope value with /.default suffixed to the resource identifier.")
		return
	}
	tid := creds.issuingTenant(tenant)
	tok, exp, err := s.Issuer.Issue(BaseURL(r)+"/"+tid+"/", tid, cl.ClientID, cl.objectID(), resource)
	if err != nil {
		oauthError(w, http.StatusInternalServerError, "server_error", 0, err.Error())
		return
	}
	s.logins.record(method, cl.ClientID)
	secs := int(time.Until(exp).Seconds())
	writeJSON(w, http.StatusOK, map[string]any{
		"token_type": "Bearer", "expires_in": secs, "ext_expires_in": secs, "access_token": tok,
	})
}

// aadstsCode reads the number of a description starting "AADSTS<n>:".
func aadstsCode(desc string) (int, bool) {
	rest, ok := strings.CutPrefix(desc, "AADSTS")
	if !ok {
		return 0, false
	}
	num, _, ok := strings.Cut(rest, ":")
	n, err := strconv.Atoi(num)
	return n, ok && err == nil
}

// resourceFromScope turns "https://management.azure.com//.default openid ..." into
// "https://management.azure.com/".
func resourceFromScope(scope string) (string, bool) {
	for _, sc := range strings.Fields(scope) {
		if res, ok := strings.CutSuffix(sc, "/.default"); ok && res != "" {
			return res, true
		}
	}
	return "", false
}

// appServiceToken is the App Service managed-identity protocol (IDENTITY_ENDPOINT,
// IDENTITY_HEADER, api-version 2019-08-01).
func (s *Service) appServiceToken(w http.ResponseWriter, r *http.Request) {
	creds := s.Credentials()
	h := r.Header.Get("X-IDENTITY-HEADER")
	if h == "" || (creds.IdentityHeader != "" && subtle.ConstantTimeCompare([]byte(h), []byte(creds.IdentityHeader)) != 1) {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"statusCode": 401, "message": "X-IDENTITY-HEADER is missing or wrong"})
		return
	}
	s.managedIdentityToken(w, r, "mi_res_id")
}

// IMDSTokenHandler serves /metadata/identity/oauth2/token for the IMDS listener.
func (s *Service) IMDSTokenHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Metadata"), "true") {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request", "error_description": "Required metadata header not specified"})
			return
		}
		s.managedIdentityToken(w, r, "msi_res_id")
	})
}

func (s *Service) managedIdentityToken(w http.ResponseWriter, r *http.Request, resIDParam string) {
	q := r.URL.Query()
	if q.Get("api-version") == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request", "error_description": "api-version is required"})
		return
	}
	resource := q.Get("resource")
	if resource == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request", "error_description": "Required query variable 'resource' is missing"})
		return
	}
	objectID := q.Get("object_id")
	if objectID == "" {
		objectID = q.Get("principal_id")
	}
	resID := q.Get(resIDParam)
	if resID == "" {
		resID = q.Get("mi_res_id")
	}
	creds := s.Credentials()
	mi, ok := creds.managedIdentity(q.Get("client_id"), objectID, resID)
	if !ok {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request", "error_description": "Identity not found"})
		return
	}
	resource = strings.TrimSuffix(resource, "/.default")
	tok, exp, err := s.Issuer.Issue(BaseURL(r)+"/"+creds.TenantID+"/", creds.TenantID, mi.ClientID, mi.objectID(), resource)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "server_error", "error_description": err.Error()})
		return
	}
	s.logins.record(LoginManagedIdentity, mi.ClientID)
	now := s.Issuer.Now()
	writeJSON(w, http.StatusOK, map[string]string{
		"access_token":   tok,
		"client_id":      mi.ClientID,
		"expires_in":     strconv.Itoa(int(exp.Sub(now).Seconds())),
		"expires_on":     strconv.FormatInt(exp.Unix(), 10),
		"ext_expires_in": strconv.Itoa(int(exp.Sub(now).Seconds())),
		"not_before":     strconv.FormatInt(now.Unix(), 10),
		"resource":       resource,
		"token_type":     "Bearer",
	})
}

// metadataEndpoints is ARM's cloud discovery document (GET /metadata/endpoints), pointing
// resource manager and login at azsim itself.
func (s *Service) metadataEndpoints(w http.ResponseWriter, r *http.Request) {
	base := BaseURL(r) + "/"
	name := s.CloudName
	if name == "" {
		name = "AzureCloud"
	}
	writeJSON(w, http.StatusOK, []map[string]any{{
		"name":            name,
		"resourceManager": base,
		"portal":          base,
		"graph":           base,
		"graphAudience":   base,
		"authentication": map[string]any{
			"loginEndpoint":    base,
			"audiences":        DefaultAudiences,
			"tenant":           "common",
			"identityProvider": "AAD",
		},
		"suffixes": map[string]any{
			"storage":           "core.windows.net",
			"keyVaultDns":       "vault.azure.net",
			"acrLoginServer":    "azurecr.io",
			"sqlServerHostname": "database.windows.net",
		},
	}})
}

func oauthError(w http.ResponseWriter, status int, code string, aadsts int, desc string) {
	body := map[string]any{
		"error":             code,
		"error_description": desc,
		"timestamp":         time.Now().UTC().Format("2006-01-02 15:04:05Z"),
		"trace_id":          randomID(),
		"correlation_id":    randomID(),
	}
	if aadsts != 0 {
		body["error_codes"] = []int{aadsts}
	}
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store, no-cache")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// AppServiceTokenHandler serves the App Service managed-identity protocol, for mounting on
// another listener (azsim also serves it at /msi/token on the HTTPS one).
func (s *Service) AppServiceTokenHandler() http.Handler { return http.HandlerFunc(s.appServiceToken) }
