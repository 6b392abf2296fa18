package e2e

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	pkcs12 "software.sslmate.com/src/go-pkcs12"

	"github.com/azure-ccm/azure-ccm/internal/azsim/identity"
	"github.com/azure-ccm/azure-ccm/internal/azsim/server"
	"github.com/azure-ccm/azure-ccm/test/framework"
	"github.com/azure-ccm/azure-ccm/test/framework/loginecho"
)

// Credentials of TestLoginCredentialsNeverLeak: distinctive, so that any trace is found.
const (
	leakSecretClientID = "a1a1a1a1-0000-4000-8000-000000000001"
	leakCertClientID   = "a1a1a1a1-0000-4000-8000-000000000002"
	leakWIClientID     = "a1a1a1a1-0000-4000-8000-000000000003"
	leakSecret         = "Leak+Test/Secret=7f3a&q%zz"
	leakPFXPassword    = "Leak-PFX-Passw0rd+42"
	leakSAIssuer       = "https://kubernetes.default.svc"
	leakSASubject      = "system:serviceaccount:kube-system:azure-cloud-controller-manager"
)

// TestLoginCredentialsNeverLeak runs the CCM binary at -v=10 with every login method against a
// login server that echoes each token request (form, headers, assertion) in every kind of failing
// answer — at start-up, and again after a successful start while services need fresh tokens —
// and checks that the client secret, the certificate password and the federated token appear in
// no log line, no event and no metric.
func TestLoginCredentialsNeverLeak(t *testing.T) {
	// Parallel with the other slow, mostly waiting tests (see doc.go).
	t.Parallel()
	nodesRequireBinary(t, framework.CCMBinaryName)
	e := framework.Start(t, framework.Options{})
	ctx := context.Background()
	dir := filepath.Join(e.Dir, "leak")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}

	// Credential material: a PKCS#12 client certificate with a password, a service-account
	// token signed by the "cluster's" issuer key.
	certPEM, pfx := leakCertificate(t)
	pfxFile := filepath.Join(dir, "client.pfx")
	if err := os.WriteFile(pfxFile, pfx, 0o600); err != nil {
		t.Fatal(err)
	}
	issuerKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	federated := leakSAToken(t, issuerKey)
	tokenFile := filepath.Join(dir, "sa-token")
	if err := os.WriteFile(tokenFile, []byte(federated), 0o600); err != nil {
		t.Fatal(err)
	}
	issuerPub, _ := x509.MarshalPKIXPublicKey(&issuerKey.PublicKey)
	creds := e.Azure.Server.Credentials()
	creds.Clients = append(creds.Clients,
		identity.Client{ClientID: leakSecretClientID, Secret: leakSecret},
		identity.Client{ClientID: leakCertClientID, CertificatePEM: string(certPEM)},
		identity.Client{ClientID: leakWIClientID, Federated: true, FederatedIssuer: leakSAIssuer, FederatedSubject: leakSASubject,
			FederatedIssuerKeysPEM: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: issuerPub}))})
	if err := e.Azure.Server.Identity().SetCredentials(creds); err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(federated, ".")
	sensitive := []string{leakSecret, leakPFXPassword, federated, parts[1], parts[2], server.DefaultIdentityHeader}

	// The login server: the metadata document it serves sends login there and ARM to azsim;
	// proxied tokens live 10 s, so that every ARM call soon needs a new one.
	const tokenLifetime = 10 * time.Second
	echo, err := loginecho.Start(loginecho.Options{Certificate: ptr(e.Azure.Server.ServerCertificate()), Upstream: e.Azure.URL,
		UpstreamTransport: e.Azure.Server.HTTPClient().Transport, TokenLifetime: tokenLifetime, Sensitive: sensitive})
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	e.CreateNodes(framework.NodeOptions{ProviderID: true}, e.Machines...)

	noSecret := map[string]any{"aadClientId": nil, "aadClientSecret": nil}
	methods := []struct {
		name string
		cfg  map[string]any
		env  []string
	}{
		{"client secret", map[string]any{"aadClientId": leakSecretClientID, "aadClientSecret": leakSecret}, nil},
		{"client certificate", leakMerge(noSecret, map[string]any{"aadClientId": leakCertClientID, "aadClientCertPath": pfxFile,
			"aadClientCertPassword": leakPFXPassword}), nil},
		{"workload identity", leakMerge(noSecret, map[string]any{"aadClientId": leakWIClientID, "useFederatedWorkloadIdentityExtension": true,
			"aadFederatedTokenFile": tokenFile}), nil},
		{"managed identity", leakMerge(noSecret, map[string]any{"useManagedIdentityExtension": true}),
			[]string{"IDENTITY_ENDPOINT=" + echo.URL + "/msi/token", "IDENTITY_HEADER=" + server.DefaultIdentityHeader}},
	}
	for i, m := range methods {
		t.Run(m.name, func(t *testing.T) {
			cfg := leakMerge(m.cfg, map[string]any{"resourceManagerEndpoint": echo.URL})
			if err := e.WriteCloudConfig(cfg); err != nil {
				t.Fatal(err)
			}
			e.SetCCMEnv(m.env...)
			echo.Fail()
			echoedBefore, servedBefore := leakTotal(echo.EchoedSensitive()), echo.Served()
			offset := startupLogSize(e)
			e.StartCCM("--v=10")
			defer func() { _ = e.StopCCM() }()

			// 1. Start-up: every kind of failing answer to this login method, each echoing the
			// request.
			e.WaitFor("every failing answer served at start-up", func(context.Context) (bool, error) {
				if ok, err := e.CCM().Exited(); ok {
					return false, fmt.Errorf("the CCM exited: %v", err)
				}
				if missing := echo.MissingSince(servedBefore, loginecho.FailureKinds...); len(missing) > 0 {
					return false, fmt.Errorf("not served yet: %v", missing)
				}
				return true, nil
			}, 3*time.Minute)

			// 2. Login works: a LoadBalancer service gets its IP.
			echo.Pass()
			svc := fmt.Sprintf("leak-%d", i)
			if _, err := e.Kube.CoreV1().Services("default").Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: svc},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": svc},
					Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}},
			}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			e.WaitFor("service "+svc+" ingress IP", e.ServiceIngress("default", svc), 3*time.Minute)

			// 3. Login fails again while the service changes: its reconcile needs a new token
			// and fails with the login error, which becomes an event on the service. The SDK
			// keeps using a token until it expires (a failed early refresh is ignored), so the
			// change waits until every token handed out has expired: a reconcile with a still
			// valid token would succeed and report nothing.
			echo.Fail()
			e.WaitFor("every token the CCM got has expired", func(context.Context) (bool, error) {
				if left := time.Until(echo.LastToken().Add(tokenLifetime + time.Second)); left > 0 {
					return false, fmt.Errorf("the last token lives %s more", left.Round(time.Second))
				}
				return true, nil
			}, tokenLifetime+30*time.Second)
			s, err := e.Kube.CoreV1().Services("default").Get(ctx, svc, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443), Protocol: corev1.ProtocolTCP})
			if _, err := e.Kube.CoreV1().Services("default").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			e.WaitFor("a login failure reported on service "+svc, func(ctx context.Context) (bool, error) {
				evs, err := e.Kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + svc})
				if err != nil {
					return false, err
				}
				for _, ev := range evs.Items {
					if strings.Contains(ev.Message, "login failed") {
						t.Logf("event %s: %s", ev.Reason, ev.Message)
						return true, nil
					}
				}
				return false, fmt.Errorf("no login failure among %d events", len(evs.Items))
			}, 3*time.Minute)
			metrics := leakScrape(t, e)
			if err := e.StopCCM(); err != nil {
				t.Errorf("the CCM: %v", err)
			}
			echo.Pass()

			// The hostile server really received (and echoed) the credential...
			if leakTotal(echo.EchoedSensitive()) == echoedBefore {
				t.Fatalf("no failing answer echoed a credential: the check proves nothing")
			}
			// ... and nothing shows it.
			log := startupLogFrom(t, e, offset)
			if !strings.Contains(log, "login failed") || !strings.Contains(log, "round_trippers") {
				t.Fatalf("the log has no login failure or no -v=10 request lines (%d bytes)", len(log))
			}
			evs, err := e.Kube.CoreV1().Events("").List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var events strings.Builder
			for _, ev := range evs.Items {
				fmt.Fprintf(&events, "%s %s/%s %s: %s\n", ev.Reason, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Source.Component, ev.Message)
			}
			for what, text := range map[string]string{"the CCM log": log, "the events": events.String(), "/metrics": metrics} {
				leakAssertClean(t, what, text, sensitive)
			}
			t.Logf("%d log bytes, %d events, %d metric bytes checked; login server: %v", len(log), len(evs.Items), len(metrics), echo.Served())
		})
	}
}

func leakMerge(maps ...map[string]any) map[string]any {
	out := map[string]any{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func leakTotal(m map[loginecho.Kind]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// leakAssertClean fails for each credential (raw, form- or JSON-encoded) text shows.
func leakAssertClean(t *testing.T, what, text string, sensitive []string) {
	t.Helper()
	for _, v := range sensitive {
		for _, form := range []string{v, url.QueryEscape(v), strings.ReplaceAll(v, "&", `\u0026`)} {
			if i := strings.Index(text, form); i >= 0 {
				lo, hi := max(0, i-200), min(len(text), i+len(form)+50)
				t.Errorf("%s shows a credential (%.10s…) in: …%s…", what, v, text[lo:hi])
				break
			}
		}
	}
}

// leakScrape reads the CCM's /metrics (open to anonymous clients in the framework's flags).
func leakScrape(t *testing.T, e *framework.Env) string {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := hc.Get(fmt.Sprintf("https://127.0.0.1:%d/metrics", e.CCMPort()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "azure_ccm_arm_requests_total") {
		t.Fatalf("/metrics: %d %v (%d bytes)", resp.StatusCode, err, len(b))
	}
	return string(b)
}

// leakCertificate is a self-signed client certificate as PEM (for azsim) and as a PKCS#12 file
// protected by leakPFXPassword (for the CCM).
func leakCertificate(t *testing.T) (certPEM, pfx []byte) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(42), Subject: pkix.Name{CommonName: "azure-ccm-leak-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	if pfx, err = pkcs12.LegacyDES.Encode(key, cert, nil, leakPFXPassword); err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pfx
}

// leakSAToken is a projected service-account token signed by the issuer key.
func leakSAToken(t *testing.T, key *rsa.PrivateKey) string {
	t.Helper()
	now := time.Now()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.RegisteredClaims{Issuer: leakSAIssuer, Subject: leakSASubject,
		Audience: jwt.ClaimStrings{identity.DefaultFederatedAudience}, IssuedAt: jwt.NewNumericDate(now),
		NotBefore: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(2 * time.Hour))})
	tok.Header["kid"] = "leak-test"
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
