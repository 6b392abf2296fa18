package provider

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	restclient "k8s.io/client-go/rest"
	cloudprovider "k8s.io/cloud-provider"
	pkcs12 "software.sslmate.com/src/go-pkcs12"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/testutil"
	"github.com/azure-ccm/azure-ccm/internal/writer"
)

func testPFX(t *testing.T, password string) []byte {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "startup-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pfx, err := pkcs12.LegacyDES.Encode(key, cert, nil, password)
	if err != nil {
		t.Fatal(err)
	}
	return pfx
}

// Local credential material that cannot be read is a configuration mistake: Prepare reports it
// with the key named, before any network call, instead of start-up retrying it forever.
func TestPrepareFailsFastOnCredentialFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.pfx", testPFX(t, "right-password"))
	garbage := write("garbage.pfx", []byte("this is not a certificate"))
	empty := write("empty-token", nil)
	token := write("token", []byte("eyJhbGciOiJSUzI1NiJ9.e30.c2ln"))
	base := `"tenantId":"t","subscriptionId":"s","resourceGroup":"rg","location":"eastus","aadClientId":"c"`
	for name, tc := range map[string]struct{ extra, want string }{
		"missing certificate file": {fmt.Sprintf(`"aadClientCertPath":%q`, filepath.Join(dir, "nope.pem")), "aadClientCertPath: open "},
		"unreadable PFX":           {fmt.Sprintf(`"aadClientCertPath":%q`, garbage), "aadClientCertPath " + garbage + ": cannot read certificate and key"},
		"wrong PFX password": {fmt.Sprintf(`"aadClientCertPath":%q,"aadClientCertPassword":"wrong-password"`, good),
			"check aadClientCertPassword"},
		"missing federated token": {fmt.Sprintf(`"useFederatedWorkloadIdentityExtension":true,"aadFederatedTokenFile":%q`, filepath.Join(dir, "none")),
			"aadFederatedTokenFile (or AZURE_FEDERATED_TOKEN_FILE): open "},
		"empty federated token": {fmt.Sprintf(`"useFederatedWorkloadIdentityExtension":true,"aadFederatedTokenFile":%q`, empty), "is empty"},
		"good PFX":              {fmt.Sprintf(`"aadClientCertPath":%q,"aadClientCertPassword":"right-password"`, good), ""},
		"good federated token":  {fmt.Sprintf(`"useFederatedWorkloadIdentityExtension":true,"aadFederatedTokenFile":%q`, token), ""},
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			_, err := PrepareFromBytes([]byte("{"+base+","+tc.extra+"}"), Options{})
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "invalid cloud config: ") {
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			}
			if !config.IsInvalid(err) {
				t.Errorf("%v is not marked as a configuration mistake", err)
			}
			if strings.Contains(err.Error(), "wrong-password") {
				t.Errorf("the error shows the password: %v", err)
			}
			t.Logf("%v (in %v)", err, time.Since(start))
		})
	}
}

// A metadata document naming a login server that is not https is refused at once, not retried.
func TestStartStopsAtConfigurationMistakes(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprintf(w, `[{"name":"AzureCloud","resourceManager":"https://%s/","authentication":{"audiences":["https://a/"],"loginEndpoint":"http://login.example/"}}]`, r.Host)
	}))
	defer srv.Close()
	cfg, err := config.Parse([]byte(`{"subscriptionId":"s","resourceGroup":"rg","location":"eastus","tenantId":"t","aadClientId":"c","aadClientSecret":"secret",
		"resourceManagerEndpoint":"`+srv.URL+`"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = New(ctx, cfg, Options{StartupBackoff: 10 * time.Millisecond, ARM: arm.Options{Transport: srv.Client(), Metrics: arm.NewMetrics()}})
	if err == nil || !config.IsInvalid(err) || !strings.Contains(err.Error(), "authentication.loginEndpoint") {
		t.Fatalf("want a configuration error naming authentication.loginEndpoint, got %v", err)
	}
	if hits.Load() != 1 {
		t.Fatalf("the metadata document was fetched %d times: a configuration mistake was retried", hits.Load())
	}
}

type fakeClientBuilder struct{ kube kubernetes.Interface }

func (f fakeClientBuilder) Config(string) (*restclient.Config, error) {
	return &restclient.Config{}, nil
}
func (f fakeClientBuilder) ConfigOrDie(string) *restclient.Config       { return &restclient.Config{} }
func (f fakeClientBuilder) Client(string) (kubernetes.Interface, error) { return f.kube, nil }
func (f fakeClientBuilder) ClientOrDie(string) kubernetes.Interface     { return f.kube }

// The cloud-provider app serves /healthz before it calls Initialize: the provider is prepared
// without any network call and starts in Initialize, which waits through an ARM outage.
func TestInitializeStartsThroughOutage(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 3 {
			http.Error(w, `{"error":{"code":"ServiceUnavailable","message":"down"}}`, http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte(`{"resourceTypes":[]}`))
	}))
	defer srv.Close()
	cfg, err := config.Parse([]byte(`{"subscriptionId":"s","resourceGroup":"rg","location":"eastus","useManagedIdentityExtension":true}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	fatal := make(chan error, 1)
	c, err := Prepare(cfg, Options{StartupBackoff: 10 * time.Millisecond, Fatal: func(err error) { fatal <- err }, ARM: arm.Options{
		Credential: staticCred{}, Transport: srv.Client(), Metrics: arm.NewMetrics(),
		Environment: &config.Environment{ResourceManagerEndpoint: srv.URL, TokenAudience: "https://aud/", ActiveDirectoryEndpoint: "https://login/"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 0 || c.Started() {
		t.Fatalf("Prepare made %d calls (started=%v)", calls.Load(), c.Started())
	}
	if _, ok := c.InstancesV2(); ok {
		t.Error("InstancesV2 must not be offered before the provider started")
	}
	stop := make(chan struct{})
	defer close(stop)
	c.Initialize(fakeClientBuilder{kube: fake.NewClientset()}, stop)
	select {
	case err := <-fatal:
		t.Fatalf("fatal: %v", err)
	default:
	}
	if !c.Started() || calls.Load() != 4 {
		t.Fatalf("started=%v after %d calls", c.Started(), calls.Load())
	}
	if _, ok := c.InstancesV2(); !ok {
		t.Error("InstancesV2 missing after start")
	}
}

// A configuration mistake met in Initialize is fatal (the process exits with it logged).
func TestInitializeFatalOnConfigurationMistake(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `[{"name":"Other","resourceManager":"https://x/","authentication":{"audiences":["https://a/"],"loginEndpoint":"https://l/"}},
			{"name":"Another","resourceManager":"https://y/","authentication":{"audiences":["https://b/"],"loginEndpoint":"https://m/"}}]`)
	}))
	defer srv.Close()
	cfg, err := config.Parse([]byte(`{"cloud":"AzureCloud","subscriptionId":"s","resourceGroup":"rg","location":"eastus","useManagedIdentityExtension":true,
		"resourceManagerEndpoint":"`+srv.URL+`"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	fatal := make(chan error, 1)
	// The credential is never used: the metadata document is refused first.
	c, err := Prepare(cfg, Options{Fatal: func(err error) { fatal <- err }, ARM: arm.Options{Credential: staticCred{}, Transport: srv.Client(), Metrics: arm.NewMetrics()}})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	c.Initialize(fakeClientBuilder{kube: fake.NewClientset()}, stop)
	select {
	case err := <-fatal:
		if !strings.Contains(err.Error(), "resourceManagerEndpoint") || !strings.Contains(err.Error(), `cloud "AzureCloud" is not among`) {
			t.Fatalf("fatal error does not name the key: %v", err)
		}
	default:
		t.Fatal("Initialize did not stop the process")
	}
}

// TestInitializeEndsWithItsStopChannel: every Initialize (a config reload makes one per
// generation) starts an event broadcaster and a zone refresher; closing its stop channel ends
// them, so twenty generations in a row leave the goroutine count where it was.
func TestInitializeEndsWithItsStopChannel(t *testing.T) {
	srv, cfg := zonelessARM(t)
	c, err := Prepare(cfg, Options{Fatal: func(err error) { t.Errorf("fatal: %v", err) }, ARM: zonelessARMOptions(srv)})
	if err != nil {
		t.Fatal(err)
	}
	kube := fake.NewClientset()
	first := make(chan struct{})
	defer close(first)
	c.Initialize(fakeClientBuilder{kube: kube}, first)
	if !c.Started() {
		t.Fatal("not started")
	}
	base := runtime.NumGoroutine()
	for range 20 {
		stop := make(chan struct{})
		c.Initialize(fakeClientBuilder{kube: kube}, stop)
		close(stop)
	}
	testutil.Eventually(t, "the goroutines of twenty closed generations gone", func() error {
		if n := runtime.NumGoroutine(); n > base+5 {
			return fmt.Errorf("%d goroutines, %d before the generations", n, base)
		}
		return nil
	})
}

// TestLoadBalancerContextEndsWithTheGeneration: the start-up migrations run on the context the
// load balancer builder gets; it ends when the generation's stop channel closes (a reload
// replaced the provider), not never.
func TestLoadBalancerContextEndsWithTheGeneration(t *testing.T) {
	srv, cfg := zonelessARM(t)
	var life context.Context
	c, err := Prepare(cfg, Options{Fatal: func(err error) { t.Errorf("fatal: %v", err) },
		LoadBalancer: func(d LoadBalancerDeps) (cloudprovider.LoadBalancer, error) {
			life = d.Context
			return nil, errors.New("not needed here")
		},
		ARM: zonelessARMOptions(srv)})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	c.Initialize(fakeClientBuilder{kube: fake.NewClientset()}, stop)
	c.LoadBalancer()
	if life == nil {
		t.Fatal("the load balancer builder got no context")
	}
	if life.Err() != nil {
		t.Fatalf("the generation's context ended before its stop channel closed: %v", life.Err())
	}
	close(stop)
	select {
	case <-life.Done():
	case <-time.After(30 * time.Second): // a deadlock guard, not a speed goal
		t.Fatal("the generation's context did not end with its stop channel")
	}
}

// zonelessARM is an ARM endpoint whose location list is empty (the provider starts at once)
// and a configuration logging in with a managed identity; the server closes with the test.
func zonelessARM(t *testing.T) (*httptest.Server, *config.Config) {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"resourceTypes":[]}`))
	}))
	t.Cleanup(srv.Close)
	cfg, err := config.Parse([]byte(`{"subscriptionId":"s","resourceGroup":"rg","location":"eastus","useManagedIdentityExtension":true}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	return srv, cfg
}

// zonelessARMOptions points the provider's ARM clients at srv with a static credential.
func zonelessARMOptions(srv *httptest.Server) arm.Options {
	return arm.Options{Credential: staticCred{}, Transport: srv.Client(), Metrics: arm.NewMetrics(),
		Environment: &config.Environment{ResourceManagerEndpoint: srv.URL, TokenAudience: "https://aud/", ActiveDirectoryEndpoint: "https://login/"}}
}

// TestRetireClosesTheWriters: a retired provider's writers refuse changes (a reload retires
// the provider it replaces); a provider that never started has nothing to retire.
func TestRetireClosesTheWriters(t *testing.T) {
	srv, cfg := zonelessARM(t)
	c, err := Prepare(cfg, Options{Fatal: func(err error) { t.Errorf("fatal: %v", err) }, ARM: zonelessARMOptions(srv)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Retire(context.Background()); err != nil {
		t.Fatalf("Retire before start: %v", err)
	}
	stop := make(chan struct{})
	defer close(stop)
	c.Initialize(fakeClientBuilder{kube: fake.NewClientset()}, stop)
	if !c.Started() {
		t.Fatal("not started")
	}
	if err := c.Retire(context.Background()); err != nil {
		t.Fatalf("Retire: %v", err)
	}
	id := "/subscriptions/" + cfg.SubscriptionID + "/resourceGroups/" + cfg.ResourceGroup + "/providers/Microsoft.Network/loadBalancers/kubernetes"
	_, err = c.Writers.LoadBalancers.For(id).Submit(context.Background(), func(cur *armnetwork.LoadBalancer) (*armnetwork.LoadBalancer, error) {
		t.Error("a retired provider's writer applied a change")
		return cur, nil
	})
	if !errors.Is(err, writer.ErrClosed) {
		t.Errorf("change after Retire: %v, want writer.ErrClosed", err)
	}
}
