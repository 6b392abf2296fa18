package identity

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/golang-jwt/jwt/v5"

	"github.com/azure-ccm/azure-ccm/internal/azsim/certs"
)

const tenant = "11111111-1111-1111-1111-111111111111"

type fixture struct {
	srv    *httptest.Server
	svc    *Service
	client *http.Client
	cert   *x509.Certificate
	key    *rsa.PrivateKey
	// issuerKey signs the cluster's service-account tokens (federated assertions).
	issuerKey *rsa.PrivateKey
}

const (
	saIssuer  = "https://kubernetes.default.svc"
	saSubject = "system:serviceaccount:kube-system:ccm"
	// otherSub belongs to otherTenant.
	otherTenant = "99999999-9999-9999-9999-999999999999"
	otherSub    = "88888888-8888-8888-8888-888888888888"
)

func newFixture(t testing.TB) *fixture {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "sp"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	issuerKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := x509.MarshalPKIXPublicKey(&issuerKey.PublicKey)

	creds := Credentials{
		Tenants:             []string{otherTenant},
		SubscriptionTenants: map[string]string{otherSub: otherTenant},
		TenantID:            tenant,
		Clients: []Client{
			{ClientID: "sp-secret", Secret: "s3cret"},
			{ClientID: "sp-cert", CertificatePEM: string(certPEM)},
			{ClientID: "sp-wi", Federated: true, FederatedIssuer: saIssuer, FederatedSubject: saSubject,
				FederatedIssuerKeysPEM: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))},
		},
		ManagedIdentities: []ManagedIdentity{
			{ClientID: "mi-system", System: true},
			{ClientID: "mi-user", ObjectID: "mi-user-oid", ResourceID: "/subscriptions/s/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/u"},
		},
		IdentityHeader: "hdr",
	}
	svc, err := New(creds, NewIssuer(nil))
	if err != nil {
		t.Fatal(err)
	}
	svc.Issuer.Audiences = DefaultAudiences
	mux := http.NewServeMux()
	svc.Register(mux)
	mux.HandleFunc("/protected", func(w http.ResponseWriter, r *http.Request) {
		if err := svc.Issuer.Authorize(r); err != nil {
			var ae *AuthError
			if errors.As(err, &ae) {
				ae.WriteTo(w)
				return
			}
		}
		_, _ = w.Write([]byte("ok"))
	})
	// ARM paths: the token's tenant must be the subscription's.
	mux.HandleFunc("GET /subscriptions/{sub}/resourceGroups", func(w http.ResponseWriter, r *http.Request) {
		if err := svc.Authorize(r); err != nil {
			var ae *AuthError
			if errors.As(err, &ae) {
				ae.WriteTo(w)
				return
			}
		}
		_, _ = w.Write([]byte("ok"))
	})
	b, err := certs.Generate()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(mux)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{b.TLS}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: b.Pool()}}}
	return &fixture{srv: srv, svc: svc, client: client, cert: cert, key: key, issuerKey: issuerKey}
}

func (f *fixture) clientOptions() azcore.ClientOptions {
	return azcore.ClientOptions{
		Cloud:     cloud.Configuration{ActiveDirectoryAuthorityHost: f.srv.URL + "/"},
		Transport: f.client,
	}
}

// callProtected presents a token to the validator.
func (f *fixture) callProtected(t *testing.T, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/protected", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body.Error.Code
}

var armScope = policy.TokenRequestOptions{Scopes: []string{"https://management.azure.com//.default"}}

func TestClientSecretCredential(t *testing.T) {
	f := newFixture(t)
	cred, err := azidentity.NewClientSecretCredential(tenant, "sp-secret", "s3cret",
		&azidentity.ClientSecretCredentialOptions{ClientOptions: f.clientOptions(), DisableInstanceDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := cred.GetToken(context.Background(), armScope)
	if err != nil {
		t.Fatal(err)
	}
	if time.Until(tok.ExpiresOn) < 50*time.Minute {
		t.Errorf("token expires too soon: %v", tok.ExpiresOn)
	}
	if code, _ := f.callProtected(t, tok.Token); code != 200 {
		t.Fatalf("valid token refused: %d", code)
	}
	var c Claims
	if _, _, err := jwt.NewParser().ParseUnverified(tok.Token, &c); err != nil {
		t.Fatal(err)
	}
	if c.TenantID != tenant || c.AppID != "sp-secret" || c.Audience[0] != "https://management.azure.com/" {
		t.Errorf("claims = %+v", c)
	}

	bad, _ := azidentity.NewClientSecretCredential(tenant, "sp-secret", "wrong",
		&azidentity.ClientSecretCredentialOptions{ClientOptions: f.clientOptions(), DisableInstanceDiscovery: true})
	if _, err := bad.GetToken(context.Background(), armScope); err == nil || !strings.Contains(err.Error(), "invalid_client") {
		t.Fatalf("wrong secret: err = %v", err)
	}
}

func TestClientCertificateCredential(t *testing.T) {
	f := newFixture(t)
	cred, err := azidentity.NewClientCertificateCredential(tenant, "sp-cert", []*x509.Certificate{f.cert}, f.key,
		&azidentity.ClientCertificateCredentialOptions{ClientOptions: f.clientOptions(), DisableInstanceDiscovery: true, SendCertificateChain: true})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := cred.GetToken(context.Background(), armScope)
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := f.callProtected(t, tok.Token); code != 200 {
		t.Fatalf("valid token refused: %d", code)
	}
	// A certificate the client was not registered with is refused.
	otherKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(8), Subject: pkix.Name{CommonName: "other"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &otherKey.PublicKey, otherKey)
	otherCert, _ := x509.ParseCertificate(der)
	bad, err := azidentity.NewClientCertificateCredential(tenant, "sp-cert", []*x509.Certificate{otherCert}, otherKey,
		&azidentity.ClientCertificateCredentialOptions{ClientOptions: f.clientOptions(), DisableInstanceDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.GetToken(context.Background(), armScope); err == nil || !strings.Contains(err.Error(), "invalid_client") {
		t.Fatalf("assertion from an unregistered certificate: err = %v", err)
	}
}

// saToken is a projected service-account token signed with key.
func saToken(t *testing.T, key any, method jwt.SigningMethod, c jwt.RegisteredClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, c)
	tok.Header["kid"] = "sa-key"
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestWorkloadIdentityCredential(t *testing.T) {
	f := newFixture(t)
	claims := func(mod func(*jwt.RegisteredClaims)) jwt.RegisteredClaims {
		c := jwt.RegisteredClaims{Issuer: saIssuer, Subject: saSubject, Audience: jwt.ClaimStrings{"api://AzureADTokenExchange"},
			IssuedAt: jwt.NewNumericDate(time.Now()), ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}
		if mod != nil {
			mod(&c)
		}
		return c
	}
	write := func(tok string) string {
		p := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(p, []byte(tok), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	login := func(tok string) error {
		cred, err := azidentity.NewWorkloadIdentityCredential(&azidentity.WorkloadIdentityCredentialOptions{
			ClientOptions: f.clientOptions(), ClientID: "sp-wi", TenantID: tenant, TokenFilePath: write(tok), DisableInstanceDiscovery: true})
		if err != nil {
			t.Fatal(err)
		}
		got, err := cred.GetToken(context.Background(), armScope)
		if err == nil {
			if code, _ := f.callProtected(t, got.Token); code != 200 {
				t.Fatalf("issued token refused: %d", code)
			}
		}
		return err
	}
	if err := login(saToken(t, f.issuerKey, jwt.SigningMethodRS256, claims(nil))); err != nil {
		t.Fatalf("a valid federated token was refused: %v", err)
	}
	otherKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	for name, tc := range map[string]struct {
		token, want string
	}{
		"wrong subject": {saToken(t, f.issuerKey, jwt.SigningMethodRS256, claims(func(c *jwt.RegisteredClaims) { c.Subject = "system:serviceaccount:default:other" })), "AADSTS700213"},
		"wrong issuer":  {saToken(t, f.issuerKey, jwt.SigningMethodRS256, claims(func(c *jwt.RegisteredClaims) { c.Issuer = "https://evil.example" })), "AADSTS700211"},
		"wrong audience": {saToken(t, f.issuerKey, jwt.SigningMethodRS256, claims(func(c *jwt.RegisteredClaims) { c.Audience = jwt.ClaimStrings{"https://kubernetes.default.svc"} })),
			"AADSTS700212"},
		"signed by another key": {saToken(t, otherKey, jwt.SigningMethodRS256, claims(nil)), "AADSTS50013"},
		"not signed (HS256)":    {saToken(t, []byte("guessable"), jwt.SigningMethodHS256, claims(nil)), "AADSTS50013"},
		"expired": {saToken(t, f.issuerKey, jwt.SigningMethodRS256, claims(func(c *jwt.RegisteredClaims) {
			c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(-time.Hour))
		})), "AADSTS700024"},
	} {
		t.Run(name, func(t *testing.T) {
			err := login(tc.token)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want a refusal with %s, got %v", tc.want, err)
			}
		})
	}
}

// ARM refuses a token issued for another tenant than the subscription's; a token asked for the
// subscription's tenant is accepted. The subscription list shows the token's tenant only.
func TestTokenTenantMustMatchSubscription(t *testing.T) {
	f := newFixture(t)
	call := func(tok, sub string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/subscriptions/"+sub+"/resourceGroups", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := f.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body.Error.Code + ": " + body.Error.Message
	}
	for _, tn := range []string{tenant, otherTenant} {
		cred, err := azidentity.NewClientSecretCredential(tn, "sp-secret", "s3cret",
			&azidentity.ClientSecretCredentialOptions{ClientOptions: f.clientOptions(), DisableInstanceDiscovery: true})
		if err != nil {
			t.Fatal(err)
		}
		tok, err := cred.GetToken(context.Background(), armScope)
		if err != nil {
			t.Fatal(err)
		}
		for _, sub := range []string{"00000000-0000-0000-0000-000000000001", otherSub} {
			status, msg := call(tok.Token, sub)
			owner := tenant
			if sub == otherSub {
				owner = otherTenant
			}
			if owner == tn {
				if status != 200 {
					t.Errorf("token of %s on subscription %s of the same tenant: %d %s", tn, sub, status, msg)
				}
				continue
			}
			if status != 401 || !strings.HasPrefix(msg, "InvalidAuthenticationTokenTenant: ") || !strings.Contains(msg, owner) {
				t.Errorf("token of %s on subscription %s of tenant %s: %d %s, want 401 InvalidAuthenticationTokenTenant", tn, sub, owner, status, msg)
			}
		}
	}
}

func TestAppServiceManagedIdentity(t *testing.T) {
	f := newFixture(t)
	t.Setenv("IDENTITY_ENDPOINT", f.srv.URL+"/msi/token")
	t.Setenv("IDENTITY_HEADER", "hdr")
	for _, tc := range []struct {
		name string
		id   azidentity.ManagedIDKind
		want string
	}{
		{"system", nil, "mi-system"},
		{"user by client id", azidentity.ClientID("mi-user"), "mi-user"},
		{"user by object id", azidentity.ObjectID("mi-user-oid"), "mi-user"},
		{"user by resource id", azidentity.ResourceID("/subscriptions/s/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/u"), "mi-user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cred, err := azidentity.NewManagedIdentityCredential(&azidentity.ManagedIdentityCredentialOptions{ClientOptions: f.clientOptions(), ID: tc.id})
			if err != nil {
				t.Fatal(err)
			}
			tok, err := cred.GetToken(context.Background(), armScope)
			if err != nil {
				t.Fatal(err)
			}
			var c Claims
			if _, _, err := jwt.NewParser().ParseUnverified(tok.Token, &c); err != nil {
				t.Fatal(err)
			}
			if c.AppID != tc.want {
				t.Errorf("appid = %q, want %q", c.AppID, tc.want)
			}
			if code, _ := f.callProtected(t, tok.Token); code != 200 {
				t.Fatalf("valid token refused: %d", code)
			}
		})
	}
	// MSAL caches managed-identity tokens process-wide, so the refusals are checked on the wire.
	for _, hdr := range []string{"", "wrong"} {
		req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/msi/token?api-version=2019-08-01&resource=https://management.azure.com/", nil)
		if hdr != "" {
			req.Header.Set("X-IDENTITY-HEADER", hdr)
		}
		resp, err := f.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("identity header %q: status %d, want 401", hdr, resp.StatusCode)
		}
	}
}

func TestAuthorizeRefusals(t *testing.T) {
	f := newFixture(t)
	iss := f.svc.Issuer
	expired := *iss
	expired.Now = func() time.Time { return time.Now().Add(-2 * time.Hour) }
	oldTok, _, _ := expired.Issue("x", tenant, "a", "a", "https://management.azure.com/")
	vaultTok, _, _ := iss.Issue("x", tenant, "a", "a", "https://vault.azure.net")
	foreign, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, Claims{TenantID: tenant,
		RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour)), Audience: jwt.ClaimStrings{"https://management.azure.com/"}}}).SignedString([]byte("other key"))
	for _, tc := range []struct{ name, token, code string }{
		{"missing", "", "AuthenticationFailed"},
		{"garbage", "not-a-jwt", "InvalidAuthenticationToken"},
		{"foreign key", foreign, "InvalidAuthenticationToken"},
		{"expired", oldTok, "ExpiredAuthenticationToken"},
		{"wrong audience", vaultTok, "InvalidAuthenticationToken"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, code := f.callProtected(t, tc.token)
			if status != 401 || code != tc.code {
				t.Errorf("got %d %s, want 401 %s", status, code, tc.code)
			}
		})
	}
}

func TestMetadataEndpointsAndDiscovery(t *testing.T) {
	f := newFixture(t)
	resp, err := f.client.Get(f.srv.URL + "/metadata/endpoints?api-version=2019-05-01")
	if err != nil {
		t.Fatal(err)
	}
	var clouds []struct {
		Name            string
		ResourceManager string
		Authentication  struct {
			LoginEndpoint string
			Audiences     []string
		}
	}
	_ = json.NewDecoder(resp.Body).Decode(&clouds)
	resp.Body.Close()
	if len(clouds) != 1 || clouds[0].Name != "AzureCloud" || clouds[0].ResourceManager != f.srv.URL+"/" ||
		clouds[0].Authentication.LoginEndpoint != f.srv.URL+"/" || len(clouds[0].Authentication.Audiences) != 2 {
		t.Fatalf("metadata = %+v", clouds)
	}

	resp, err = f.client.Get(f.srv.URL + "/common/discovery/instance?api-version=1.1&authorization_endpoint=" + f.srv.URL + "/" + tenant + "/oauth2/v2.0/authorize")
	if err != nil {
		t.Fatal(err)
	}
	var disc struct {
		TenantDiscoveryEndpoint string `json:"tenant_discovery_endpoint"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&disc)
	resp.Body.Close()
	if disc.TenantDiscoveryEndpoint != f.srv.URL+"/"+tenant+"/v2.0/.well-known/openid-configuration" {
		t.Fatalf("discovery = %+v", disc)
	}
}

func TestResourceFromScope(t *testing.T) {
	for _, tc := range []struct {
		scope, want string
		ok          bool
	}{
		{"https://management.azure.com//.default openid offline_access profile", "https://management.azure.com/", true},
		{"openid https://management.core.windows.net/.default", "https://management.core.windows.net", true},
		{"openid profile", "", false},
		{"/.default", "", false},
	} {
		got, ok := resourceFromScope(tc.scope)
		if got != tc.want || ok != tc.ok {
			t.Errorf("resourceFromScope(%q) = %q, %v", tc.scope, got, ok)
		}
	}
}

// TestADFSTenantNeedsNoInstanceDiscovery is the unmodified-CCM path: tenant "adfs" keeps MSAL
// from calling login.microsoftonline.com even without DisableInstanceDiscovery.
func TestADFSTenantNeedsNoInstanceDiscovery(t *testing.T) {
	f := newFixture(t)
	cred, err := azidentity.NewClientSecretCredential("adfs", "sp-secret", "s3cret",
		&azidentity.ClientSecretCredentialOptions{ClientOptions: f.clientOptions()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tok, err := cred.GetToken(ctx, armScope)
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := f.callProtected(t, tok.Token); code != 200 {
		t.Fatalf("token refused: %d", code)
	}
}

// TestIdentityHeadersRequiredWithoutConfiguredHeader: with no identity header in the
// credentials, the App Service endpoint still wants X-IDENTITY-HEADER (any value) and the IMDS
// endpoint `Metadata: true`, as Azure does: a request a browser or a server-side request
// forgery can send without them gets no token.
func TestIdentityHeadersRequiredWithoutConfiguredHeader(t *testing.T) {
	svc, err := New(Credentials{TenantID: tenant, ManagedIdentities: []ManagedIdentity{{ClientID: "mi-system", System: true}}}, NewIssuer(nil))
	if err != nil {
		t.Fatal(err)
	}
	svc.Issuer.Audiences = DefaultAudiences
	mux := http.NewServeMux()
	svc.Register(mux)
	mux.Handle("/metadata/identity/oauth2/token", svc.IMDSTokenHandler())
	const q = "?api-version=2019-08-01&resource=https://management.azure.com/"
	for _, tc := range []struct {
		name, path, header, value string
		want                      int
	}{
		{"App Service without X-IDENTITY-HEADER", "/msi/token" + q, "", "", http.StatusUnauthorized},
		{"App Service with a header", "/msi/token" + q, "X-IDENTITY-HEADER", "anything", http.StatusOK},
		{"IMDS without Metadata", "/metadata/identity/oauth2/token" + q, "", "", http.StatusBadRequest},
		{"IMDS with Metadata: false", "/metadata/identity/oauth2/token" + q, "Metadata", "false", http.StatusBadRequest},
		{"IMDS with Metadata: true", "/metadata/identity/oauth2/token" + q, "Metadata", "true", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, tc.path, nil)
			if tc.header != "" {
				req.Header.Set(tc.header, tc.value)
			}
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("HTTP %d, want %d: %s", rec.Code, tc.want, rec.Body.String())
			}
		})
	}
}
