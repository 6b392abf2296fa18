package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/azure-ccm/azure-ccm/test/framework"
	"github.com/azure-ccm/azure-ccm/test/framework/loginecho"
)

// startupLogFrom returns what the CCM logged since offset (the log is kept across restarts).
func startupLogFrom(t *testing.T, e *framework.Env, offset int64) string {
	t.Helper()
	b, err := os.ReadFile(e.CCMLogPath())
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if int64(len(b)) < offset {
		return ""
	}
	return string(b[offset:])
}

func startupLogSize(e *framework.Env) int64 {
	st, err := os.Stat(e.CCMLogPath())
	if err != nil {
		return 0
	}
	return st.Size()
}

// TestStartupFailsFastOnConfigurationMistakes: mistakes that retrying cannot heal stop the
// CCM at once, with the key named — before login for local files and endpoints, in the
// provider's start for what the metadata document says.
func TestStartupFailsFastOnConfigurationMistakes(t *testing.T) {
	working(t)
	nodesRequireBinary(t, framework.CCMBinaryName)
	e := framework.Start(t, framework.Options{})
	garbage := filepath.Join(e.Dir, "garbage.pfx")
	if err := os.WriteFile(garbage, []byte("not a PKCS#12 file"), 0o600); err != nil {
		t.Fatal(err)
	}
	// An https metadata server (azsim's certificate, so the CCM trusts it) whose document
	// names a plain-http login server.
	cert := e.Azure.Server.ServerCertificate()
	meta := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `[{"name":"AzureCloud","resourceManager":%q,"authentication":{"audiences":["https://management.core.windows.net/"],"loginEndpoint":"http://login.example/"}}]`, e.Azure.URL+"/")
	}))
	meta.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	meta.StartTLS()
	defer meta.Close()

	for _, tc := range []struct {
		name      string
		overrides map[string]any
		want      []string
	}{
		{"missing certificate file", map[string]any{"aadClientSecret": nil, "aadClientCertPath": filepath.Join(e.Dir, "missing.pfx")},
			[]string{"aadClientCertPath: open ", "no such file or directory"}},
		{"unreadable PFX", map[string]any{"aadClientSecret": nil, "aadClientCertPath": garbage},
			[]string{"aadClientCertPath " + garbage + ": cannot read certificate and key"}},
		{"http resource manager endpoint", map[string]any{"resourceManagerEndpoint": "http://127.0.0.1:9/"},
			[]string{`resourceManagerEndpoint: "http://127.0.0.1:9/" must be an https:// URL`}},
		{"metadata naming an http login server", map[string]any{"resourceManagerEndpoint": meta.URL},
			[]string{"resourceManagerEndpoint: ", `authentication.loginEndpoint: "http://login.example/" must be an https:// URL`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := e.WriteCloudConfig(tc.overrides); err != nil {
				t.Fatal(err)
			}
			offset := startupLogSize(e)
			start := time.Now()
			e.StartCCM()
			p := e.CCM()
			select {
			case <-p.Done():
			case <-time.After(30 * time.Second):
				_ = e.StopCCM()
				t.Fatalf("the CCM still runs 30 s after start; log:\n%s", startupLogFrom(t, e, offset))
			}
			took := time.Since(start)
			_, exitErr := p.Exited()
			_ = e.StopCCM() // forgets the exited process
			log := startupLogFrom(t, e, offset)
			if exitErr == nil {
				t.Errorf("the CCM exited with status 0")
			}
			for _, w := range tc.want {
				// The error is a structured log value: klog escapes its quotes.
				if !strings.Contains(log, w) && !strings.Contains(log, strings.ReplaceAll(w, `"`, `\"`)) {
					t.Errorf("the log does not say %q:\n%s", w, log)
				}
			}
			if strings.Contains(log, "start-up failed; retrying") {
				t.Errorf("a configuration mistake was retried:\n%s", log)
			}
			t.Logf("exited after %v (%v)", took.Round(time.Millisecond), exitErr)
		})
	}
}

// probeSpec is one of the chart's probes.
type probeSpec struct {
	name                                   string
	period, timeout                        time.Duration
	failureThreshold, initialDelay, failed int
	succeeded                              bool
}

func newProbeSpec(name string, p *corev1.Probe) *probeSpec {
	if p == nil {
		return nil
	}
	return &probeSpec{name: name, period: time.Duration(p.PeriodSeconds) * time.Second,
		timeout: time.Duration(p.TimeoutSeconds) * time.Second, failureThreshold: int(p.FailureThreshold),
		initialDelay: int(p.InitialDelaySeconds)}
}

// TestStartupLoginOutage: the login server fails for 3 minutes from the CCM's start. The
// chart's startupProbe and livenessProbe, played against the secure port as the kubelet would
// (same path, period, timeout and thresholds), never fail: TLS completes and /healthz answers
// throughout, so the pod is not restarted; no controller works meanwhile; once login works the
// node is initialised.
func TestStartupLoginOutage(t *testing.T) {
	// Parallel with the other slow, mostly waiting tests (see doc.go).
	t.Parallel()
	nodesRequireBinary(t, framework.CCMBinaryName)
	const outage = 3 * time.Minute
	var d appsv1.Deployment
	if err := yaml.Unmarshal(rbacRender(t, "ccm-deployment.yaml"), &d); err != nil {
		t.Fatal(err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	startup, liveness := newProbeSpec("startupProbe", c.StartupProbe), newProbeSpec("livenessProbe", c.LivenessProbe)
	if startup == nil || liveness == nil || c.LivenessProbe.HTTPGet == nil {
		t.Fatalf("the chart's CCM has no startupProbe or no HTTP livenessProbe: %+v %+v", c.StartupProbe, c.LivenessProbe)
	}
	path := c.LivenessProbe.HTTPGet.Path

	e := framework.Start(t, framework.Options{})
	echo, err := loginecho.Start(loginecho.Options{Certificate: ptr(e.Azure.Server.ServerCertificate()), Upstream: e.Azure.URL,
		UpstreamTransport: e.Azure.Server.HTTPClient().Transport})
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	echo.Fail(loginecho.Unavailable, loginecho.ServerError)
	// The metadata document comes from the echo server: login goes there, ARM to azsim.
	if err := e.WriteCloudConfig(map[string]any{"resourceManagerEndpoint": echo.URL}); err != nil {
		t.Fatal(err)
	}
	m := e.Machines[0]
	nodesCreate(t, e, m, "", nil)
	e.StartCCM("--leader-elect=true", "--leader-elect-resource-namespace=kube-system",
		"--leader-elect-resource-name=cloud-controller-manager", "--leader-elect-lease-duration=15s",
		"--leader-elect-renew-deadline=10s", "--leader-elect-retry-period=2s")
	start := time.Now()

	// The kubelet's prober: HTTPS without verification, no credentials.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	probe := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d%s", e.CCMPort(), path), nil)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		return nil
	}
	ticker := func(p *probeSpec) *time.Ticker { return time.NewTicker(p.period) }
	st, lt := ticker(startup), ticker(liveness)
	defer st.Stop()
	defer lt.Stop()
	deadline := time.After(outage)
	var probes, failures int
loop:
	for {
		select {
		case <-deadline:
			break loop
		case <-e.CCM().Done():
			t.Fatalf("the CCM exited during the login outage; log:\n%s", startupLogFrom(t, e, 0))
		case <-st.C:
			if startup.succeeded {
				continue
			}
			probes++
			if err := probe(startup.timeout); err != nil {
				failures++
				if startup.failed++; startup.failed >= startup.failureThreshold {
					t.Fatalf("startupProbe failed %d times in a row (%v): the kubelet would restart the CCM", startup.failed, err)
				}
				t.Logf("startupProbe failed at %v: %v", time.Since(start).Round(time.Second), err)
				continue
			}
			startup.succeeded = true
			t.Logf("startupProbe succeeded %v after start", time.Since(start).Round(time.Second))
		case <-lt.C:
			if !startup.succeeded {
				continue // the kubelet runs liveness only after the startup probe succeeded
			}
			probes++
			if err := probe(liveness.timeout); err != nil {
				failures++
				if liveness.failed++; liveness.failed >= liveness.failureThreshold {
					t.Fatalf("livenessProbe failed %d times in a row (%v): the kubelet would restart the CCM", liveness.failed, err)
				}
				t.Logf("livenessProbe failed at %v: %v", time.Since(start).Round(time.Second), err)
				continue
			}
			liveness.failed = 0
		}
	}
	served := 0
	for _, n := range echo.Served() {
		served += n
	}
	t.Logf("%d probes in %v, %d failed; the login server refused %d token requests", probes, outage, failures, served)
	if !startup.succeeded {
		t.Fatal("the startupProbe never succeeded")
	}
	if served < 3 {
		t.Fatalf("the CCM asked the login server only %d times during the outage", served)
	}
	// Nothing ran without a login: the node is still uninitialised.
	if n, err := nodesGet(context.Background(), e, m.NodeName); err != nil {
		t.Fatal(err)
	} else if !nodesHasTaint(n, framework.UninitializedTaintKey) {
		t.Fatalf("node %s was initialised during the login outage", m.NodeName)
	}

	echo.Pass()
	// The start-up backoff is at most 30 s.
	e.WaitFor("node "+m.NodeName+" initialised after the outage", e.NodeInitialized(m.NodeName), 2*time.Minute)
	if log := startupLogFrom(t, e, 0); !strings.Contains(log, "Azure cloud provider started") {
		t.Errorf("the log does not say the provider started")
	}
}
