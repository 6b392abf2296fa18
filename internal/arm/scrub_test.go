package arm_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	pkcs12 "software.sslmate.com/src/go-pkcs12"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/test/framework/loginecho"
)

// Credentials of the leak tests: distinctive so that any trace of them is found.
const (
	leakSecret      = "Sup3r+Secret/Value=with&form%chars"
	leakPFXPassword = "pfx-Pa55word+zz"
	leakIDHeader    = "identity-header-d41d8cd98f00"
)

// leakFixture writes the credential files of every login method and returns their values.
type leakFixture struct {
	dir, pfxFile, tokenFile, federatedToken string
}

func newLeakFixture(t *testing.T) leakFixture {
	t.Helper()
	dir := t.TempDir()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "leak-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pfx, err := pkcs12.LegacyDES.Encode(key, cert, nil, leakPFXPassword)
	if err != nil {
		t.Fatal(err)
	}
	f := leakFixture{dir: dir, pfxFile: filepath.Join(dir, "client.pfx"), tokenFile: filepath.Join(dir, "sa-token")}
	if err := os.WriteFile(f.pfxFile, pfx, 0o600); err != nil {
		t.Fatal(err)
	}
	f.federatedToken = fakeServiceAccountToken()
	if err := os.WriteFile(f.tokenFile, []byte(f.federatedToken), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// fakeServiceAccountToken is shaped like a projected service-account token.
func fakeServiceAccountToken() string {
	enc := base64.RawURLEncoding.EncodeToString
	h, _ := json.Marshal(map[string]any{"alg": "RS256", "kid": "leak"})
	c, _ := json.Marshal(map[string]any{"iss": "https://kubernetes.default.svc", "sub": "system:serviceaccount:kube-system:ccm",
		"aud": []string{"api://AzureADTokenExchange"}, "exp": time.Now().Add(time.Hour).Unix()})
	return enc(h) + "." + enc(c) + "." + enc([]byte("federated-token-signature-bytes"))
}

// sensitive are the values that must never be shown, in the forms they travel in.
func (f leakFixture) sensitive() []string {
	return []string{leakSecret, leakPFXPassword, leakIDHeader, f.federatedToken,
		strings.Split(f.federatedToken, ".")[1], strings.Split(f.federatedToken, ".")[2]}
}

func (f leakFixture) methods() map[string]string {
	return map[string]string{
		"client secret":      fmt.Sprintf(`"aadClientId":"c1","aadClientSecret":%q`, leakSecret),
		"client certificate": fmt.Sprintf(`"aadClientId":"c1","aadClientCertPath":%q,"aadClientCertPassword":%q`, f.pfxFile, leakPFXPassword),
		"workload identity":  fmt.Sprintf(`"aadClientId":"c1","useFederatedWorkloadIdentityExtension":true,"aadFederatedTokenFile":%q`, f.tokenFile),
		"managed identity":   `"useManagedIdentityExtension":true`,
	}
}

// assertClean fails if text shows a credential (or any fragment of the federated token).
func assertClean(t *testing.T, what, text string, f leakFixture) {
	t.Helper()
	for _, v := range f.sensitive() {
		if strings.Contains(text, v) || strings.Contains(text, strings.ReplaceAll(v, "+", "%2B")) {
			t.Errorf("%s shows a credential (%.12s…):\n%s", what, v, text)
		}
	}
}

// TestLoginErrorsNeverShowCredentials logs in with every method against a login server that
// echoes each request (form, headers, assertion) in every kind of failing answer: the errors
// name the method, status and Entra's code, and show no credential.
func TestLoginErrorsNeverShowCredentials(t *testing.T) {
	f := newLeakFixture(t)
	// Managed identity finds its endpoint in the process environment: those cases share one
	// server and run one at a time; the others run in parallel, each with its own server.
	miEcho := startEcho(t, f)
	t.Setenv("IDENTITY_ENDPOINT", miEcho.URL+"/msi/token")
	t.Setenv("IDENTITY_HEADER", leakIDHeader)
	for _, kind := range loginecho.FailureKinds {
		t.Run("managed identity/"+string(kind), func(t *testing.T) {
			checkLoginFailure(t, f, miEcho, f.methods()["managed identity"], kind)
		})
	}
	t.Run("service principals", func(t *testing.T) {
		for name, extra := range f.methods() {
			if name == "managed identity" {
				continue
			}
			for _, kind := range loginecho.FailureKinds {
				t.Run(name+"/"+string(kind), func(t *testing.T) {
					t.Parallel()
					checkLoginFailure(t, f, startEcho(t, f), extra, kind)
				})
			}
		}
	})
}

func startEcho(t *testing.T, f leakFixture) *loginecho.Server {
	t.Helper()
	echo, err := loginecho.Start(loginecho.Options{Sensitive: f.sensitive()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(echo.Close)
	return echo
}

// checkLoginFailure logs in once against echo answering kind, and checks the error.
func checkLoginFailure(t *testing.T, f leakFixture, echo *loginecho.Server, extra string, kind loginecho.Kind) {
	t.Helper()
	env := config.Environment{Name: "leak", ResourceManagerEndpoint: "https://arm.invalid/",
		TokenAudience: "https://management.core.windows.net/", ActiveDirectoryEndpoint: echo.URL + "/"}
	cfg, err := config.Parse([]byte(`{"tenantId":"t1","subscriptionId":"s","resourceGroup":"rg","location":"eastus",`+extra+`}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	echo.Fail(kind)
	before, echoedBefore := echo.Served()[kind], echo.EchoedSensitive()[kind]
	cred, _, err := arm.NewCredential(cfg, env, echo.Client())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{"https://management.core.windows.net//.default"}})
	if err == nil {
		t.Fatal("a failing login returned a token")
	}
	if echo.Served()[kind] == before {
		t.Fatalf("the login server was not asked (%v)", err)
	}
	// The check is only worth something if the answer really carried the credential.
	if echo.EchoedSensitive()[kind] == echoedBefore {
		t.Fatalf("the %s answer did not carry a credential: the check proves nothing", kind)
	}
	var le *arm.LoginError
	if !errors.As(err, &le) {
		t.Fatalf("want a LoginError, got %T: %v", err, err)
	}
	for _, text := range []string{err.Error(), fmt.Sprintf("%v", err), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
		assertClean(t, "the error", text, f)
	}
	if !strings.Contains(err.Error(), "login failed") {
		t.Errorf("the error does not say what failed: %v", err)
	}
	t.Logf("%v", err)
}

func TestScrubberEncodings(t *testing.T) {
	cfg := &config.Config{AADClientSecret: config.Secret(leakSecret), AADClientCertPassword: "p@ss word!"}
	s := arm.NewScrubber(cfg, func(string) string { return "" })
	b, _ := json.Marshal(map[string]string{"d": "x " + leakSecret + " <>&"})
	for _, in := range []string{
		"form: client_secret=" + strings.NewReplacer("+", "%2B", "/", "%2F", "=", "%3D", "&", "%26", "%", "%25").Replace(leakSecret),
		"raw: " + leakSecret, "json: " + string(b), "password p@ss word! and p%40ss+word%21",
		"assertion eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl end",
	} {
		out := s.Scrub(in)
		if strings.Contains(out, "Secret") || strings.Contains(out, "ss word") || strings.Contains(out, "ss+word") || strings.Contains(out, "eyJ") {
			t.Errorf("Scrub(%q) = %q", in, out)
		}
	}
}

func TestScrubberForms(t *testing.T) {
	const secret = "Sup3r+Secret/Value=with&form<chars>"
	s := arm.NewScrubber(&config.Config{AADClientSecret: secret}, func(string) string { return "" })
	b64 := base64.StdEncoding.EncodeToString
	b64url := base64.URLEncoding.EncodeToString
	q := url.QueryEscape
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "a " + secret + " b", "a REDACTED b"},
		{"upper case", "a " + strings.ToUpper(secret) + " b", "a REDACTED b"},
		{"lower case", "a " + strings.ToLower(secret) + " b", "a REDACTED b"},
		{"cut copy of 8 bytes", "a " + secret[:8] + " b", "a REDACTED b"},
		{"cut copy of 7 bytes stays", "a " + secret[:7] + " b", "a " + secret[:7] + " b"},
		{"query escaped", "client_secret=" + q(secret) + "&x=1", "client_secret=REDACTED&x=1"},
		{"query escaped, lower-case hex", "s=" + strings.ToLower(q(secret)) + ";", "s=REDACTED;"},
		{"path escaped", "/v/" + url.PathEscape(secret) + "/x", "/v/REDACTED/x"},
		{"JSON escaped", `{"s":"` + strings.Trim(string(mustJSON(secret)), `"`) + `"}`, `{"s":"REDACTED"}`},
		{"HTML escaped", "<p>" + html.EscapeString(secret) + "</p>", "<p>REDACTED</p>"},
		{"base64", "basic " + b64([]byte(secret)) + " end", "basic REDACTED end"},
		{"base64url", "t=" + b64url([]byte(secret)) + "&", "t=REDACTED&"},
		{"base64 without padding", "t=" + base64.RawStdEncoding.EncodeToString([]byte(secret)) + " end", "t=REDACTED end"},
		{"base64 cut", "t=" + b64([]byte(secret))[:12] + " end", "t=REDACTED end"},
		{"query escaped twice", "u=" + q(q(secret)) + "&", "u=REDACTED&"},
		{"base64 of the query-escaped form", "x " + b64([]byte(q(secret))) + " y", "x REDACTED y"},
		{"HTML escape of the JSON form", "x " + html.EscapeString(string(mustJSON(secret))) + " y", "x &#34;REDACTED&#34; y"},
		{"two copies", secret + "," + secret, "REDACTED,REDACTED"},
		{"copy after a partial match of its start", "Sup3r+Se" + secret, "REDACTED"},
		{"unrelated text stays", "nothing to see here", "nothing to see here"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := s.Scrub(tc.in); got != tc.want {
				t.Errorf("Scrub(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
	// A credential inside a larger base64 text, at each of the three byte alignments: only the
	// characters that mix it with its neighbours are left.
	for k := range 3 {
		body := strings.Repeat("x", k) + "client_secret=" + secret + "&grant_type=client_credentials"
		for _, enc := range []func([]byte) string{b64, b64url} {
			out := s.Scrub(enc([]byte(body)))
			if !strings.Contains(out, "REDACTED") || len(out) > len(enc([]byte(body)))-len(secret) {
				t.Errorf("alignment %d: %q not scrubbed", k, out)
			}
		}
	}
}

func mustJSON(v string) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// TestShortSecretsRefused: a client secret or certificate password of fewer than
// config.MinSecretLength characters cannot be scrubbed, so configuration refuses it for the
// login in use; AKS's "msi" placeholder next to a managed identity stays accepted.
func TestShortSecretsRefused(t *testing.T) {
	base := `"subscriptionId":"s","resourceGroup":"rg","location":"eastus","tenantId":"t","aadClientId":"c"`
	for _, tc := range []struct{ name, doc, want string }{
		{"client secret", `{` + base + `,"aadClientSecret":"abc"}`,
			"aadClientSecret: is 3 characters long; secrets shorter than 4 characters are refused, because they cannot be removed from logs without destroying them"},
		{"certificate password", `{` + base + `,"aadClientCertPath":"/c.pfx","aadClientCertPassword":"pw"}`,
			"aadClientCertPassword: is 2 characters long; passwords shorter than 4 characters are refused, because they cannot be removed from logs without destroying them (an empty password is accepted)"},
		{"managed identity placeholder", `{` + base + `,"useManagedIdentityExtension":true,"aadClientSecret":"msi"}`, ""},
		{"four characters", `{` + base + `,"aadClientSecret":"abcd"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.doc), func(string) string { return "" })
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Fatalf("got %v\nwant %s", err, tc.want)
			}
		})
	}
	_, err := config.Parse([]byte(`{`+base+`}`), func(k string) string {
		if k == config.EnvClientSecret {
			return "xyz"
		}
		return ""
	})
	if want := "AZURE_CLIENT_SECRET: is 3 characters long"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got %v, want %s…", err, want)
	}
}
