package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/azure-ccm/azure-ccm/test/framework"
	"github.com/azure-ccm/azure-ccm/test/framework/loginecho"
)

// replicaHealthz is GET /healthz on a replica's secure port as the kubelet's prober makes it
// (no verification, no credentials): the status code and the body.
func replicaHealthz(r *framework.CCMReplica) (int, string, error) {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // G402: the kubelet's prober does not verify either
	resp, err := hc.Get(fmt.Sprintf("https://127.0.0.1:%d/healthz?verbose", r.Port))
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestLoginMisconfiguredLeaderStepsDown runs two replicas with leader election. The leader logs
// in through a login server (loginecho in front of azsim) and needs a new token every 10 s; the
// standby has a configuration of its own that logs in to azsim directly. Each phase creates a
// LoadBalancer service, whose writes need tokens.
//   - A transient login outage (503 for longer than --login-step-down-after) leaves /healthz
//     healthy and the lease with the leader, which serves the service once login works.
//   - The login server then presents a certificate the leader does not trust: /healthz fails
//     on the login-health check, and after --login-step-down-after the leader exits; the standby
//     takes the lease within the bound (step-down + a check period + the lease duration) and
//     serves the service the leader could not.
func TestLoginMisconfiguredLeaderStepsDown(t *testing.T) {
	// Parallel with the other slow, mostly waiting tests (see doc.go).
	t.Parallel()
	nodesRequireBinary(t, framework.CCMBinaryName)
	const (
		stepDown      = 30 * time.Second
		leaseDuration = 6 * time.Second
		checkPeriod   = 5 * time.Second // the login-health controller's
		tokenLifetime = 10 * time.Second
	)
	e := framework.Start(t, framework.Options{})
	if len(e.Machines) < 3 {
		t.Fatalf("default topology has %d machines", len(e.Machines))
	}
	standbyConfig := filepath.Join(t.TempDir(), "azure.json")
	b, err := json.Marshal(e.Azure.CloudConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(standbyConfig, b, 0o600); err != nil {
		t.Fatal(err)
	}
	echo, err := loginecho.Start(loginecho.Options{Certificate: ptr(e.Azure.Server.ServerCertificate()), Upstream: e.Azure.URL,
		UpstreamTransport: e.Azure.Server.HTTPClient().Transport, TokenLifetime: tokenLifetime})
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	echo.Pass()
	// The metadata document comes from the echo server: the leader logs in there, ARM is azsim.
	if err := e.WriteCloudConfig(map[string]any{"resourceManagerEndpoint": echo.URL}); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--leader-elect=true", "--leader-elect-lease-duration=" + leaseDuration.String(),
		"--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s",
		"--controllers=cloud-node,cloud-node-lifecycle,service,login-health", "--login-step-down-after=" + stepDown.String()}
	for _, m := range e.Machines {
		nodesCreate(t, e, m, "", nil)
	}
	leader := e.StartCCMReplica("leader", flags...)
	e.WaitFor("the leader holds the lease", func(context.Context) (bool, error) {
		return haHasAcquired(leader), fmt.Errorf("no %q in its log", haAcquired)
	}, time.Minute)
	for _, m := range e.Machines {
		e.WaitFor("leader initialised "+m.NodeName, e.NodeInitialized(m.NodeName), time.Minute)
	}
	// Each phase creates a LoadBalancer service: its writes need tokens.
	service := func(name string) {
		t.Helper()
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name},
				Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
		if _, err := e.Kube.CoreV1().Services("default").Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	served := func(name string, within time.Duration) {
		t.Helper()
		e.WaitFor("service "+name+" has an IP", func(ctx context.Context) (bool, error) {
			s, err := e.Kube.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return len(s.Status.LoadBalancer.Ingress) > 0, fmt.Errorf("no ingress")
		}, within)
	}
	standby := e.StartCCMReplica("standby", append(flags, "--cloud-config="+standbyConfig)...)
	healthy := func(what string) {
		t.Helper()
		code, body, err := replicaHealthz(leader)
		if err != nil || code != http.StatusOK {
			t.Fatalf("%s: leader /healthz = %d %v\n%s", what, code, err, body)
		}
	}
	healthy("before the outage")

	// A transient outage, longer than the step-down bound: nothing changes hands.
	echo.Fail(loginecho.Unavailable)
	service("during-outage")
	outage := time.Now()
	for time.Since(outage) < stepDown+2*checkPeriod {
		healthy(fmt.Sprintf("%s into a transient login outage", time.Since(outage).Round(time.Second)))
		if exited, err := leader.Exited(); exited {
			t.Fatalf("the leader exited during a transient outage: %v\n%s", err, leader.Log())
		}
		if haHasAcquired(standby) {
			t.Fatal("the standby took the lease during a transient outage")
		}
		select {
		case <-leader.Done():
		case <-time.After(checkPeriod):
		}
	}
	if echo.Served()[loginecho.Unavailable] == 0 {
		t.Fatal("the leader made no token request during the outage: the test proves nothing")
	}
	echo.Pass()
	served("during-outage", 2*time.Minute)

	// The login server's certificate is no longer trusted: a configuration error.
	echo.ServeUntrusted()
	// Once the leader's token has expired, its next write needs a login.
	e.WaitFor("the leader's token expired", func(context.Context) (bool, error) {
		return time.Since(echo.LastToken()) > tokenLifetime+time.Second, fmt.Errorf("last token at %s", echo.LastToken().Format(time.RFC3339))
	}, time.Minute)
	service("untrusted")
	broken := time.Now()
	e.WaitFor("the leader's /healthz fails on login-health", func(context.Context) (bool, error) {
		code, body, err := replicaHealthz(leader)
		if err != nil {
			return false, err
		}
		return code != http.StatusOK && strings.Contains(body, "[-]login-health failed"), fmt.Errorf("/healthz %d:\n%s", code, body)
	}, stepDown)
	bound := stepDown + checkPeriod + 3*leaseDuration + 30*time.Second // slack for CI's load
	e.WaitFor("the standby takes the lease", func(context.Context) (bool, error) {
		return haHasAcquired(standby), fmt.Errorf("the standby has not acquired the lease")
	}, bound)
	took := time.Since(broken)
	select {
	case <-leader.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the standby leads but the old leader still runs")
	}
	log := leader.Log()
	for _, want := range []string{"Stepping down", "not trusted", "standby replica"} {
		if !strings.Contains(log, want) {
			t.Errorf("the leader's log does not say %q", want)
		}
	}
	served("untrusted", 2*time.Minute)
	t.Logf("standby leads %s after the login server became untrusted (--login-step-down-after %s, lease %s)",
		took.Round(100*time.Millisecond), stepDown, leaseDuration)
}
