package e2e

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/internal/cloudconfig"
	"github.com/azure-ccm/azure-ccm/internal/provider"
	"github.com/azure-ccm/azure-ccm/test/framework"
	"github.com/azure-ccm/azure-ccm/test/framework/azurenames"
)

// TestCloudConfigSecretReload starts the CCM with its azure.json only in the Secret
// kube-system/azure-cloud-provider and --enable-dynamic-reloading, under leader election.
// Editing the Secret (a load balancer setting and a tag) reaches Azure without a restart of the
// process and without a leadership change; an invalid edit is refused with an event on the
// Secret naming the key, and the running configuration stays. The Secret also configures a
// client certificate beside the client secret: the CCM starts with the secret and records a
// LoginMethodsIgnored Warning on the Secret. The CCM runs at -v=10, where client-go logs the
// response bodies it reads: neither the client secret nor the Secret's data (the document, raw
// or base64 as the API server sends it) may appear in its log, through the first read or the
// watch that reloads it.
func TestCloudConfigSecretReload(t *testing.T) {
	working(t)
	ctx := context.Background()
	secretData := func(d map[string]any) map[string][]byte {
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		return map[string][]byte{cloudconfig.SecretKey: b}
	}
	var doc map[string]any
	l := lbStart(t, lbOptions{
		CCMArgs: []string{"--v=10", "--cloud-config=", "--enable-dynamic-reloading=true", "--leader-elect=true",
			"--leader-elect-lease-duration=15s", "--leader-elect-renew-deadline=10s", "--leader-elect-retry-period=2s"},
		BeforeCCM: func(e *framework.Env) {
			doc = e.Azure.CloudConfig()
			doc["tags"] = "env=one"
			// A second login method, as an old install may have left: the client secret comes
			// first in the existing provider's order, so the CCM starts with it and says on the
			// Secret that the certificate is ignored (the file need not exist: it is not read).
			doc["aadClientCertPath"] = "/etc/kubernetes/old-client.pem"
			if _, err := e.Kube.CoreV1().Secrets(cloudconfig.DefaultSecretNamespace).Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: cloudconfig.DefaultSecretNamespace, Name: cloudconfig.DefaultSecretName},
				Data:       secretData(doc),
			}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			// The file the framework wrote is not given: the Secret is the only source.
			if err := os.Remove(e.CloudConfigPath); err != nil {
				t.Fatal(err)
			}
		},
	})
	e := l.Env

	svc := l.create(lbService("web", nil))
	l.waitIP("web")
	svcLB := azurenames.ServiceLBName(svc.UID)
	// lbSettings is what the two edited keys set: the LB's env tag and the service rules'
	// disableOutboundSnat.
	lbSettings := func(ctx context.Context) (tag string, snatOff []bool, err error) {
		lb, err := l.net.NewLoadBalancersClient().Get(ctx, l.rg, lbCluster, nil)
		if err != nil {
			return "", nil, err
		}
		if v := lb.Tags["env"]; v != nil {
			tag = *v
		}
		for _, r := range view(&lb.LoadBalancer, svcLB).Rules {
			snatOff = append(snatOff, r.Properties.DisableOutboundSnat != nil && *r.Properties.DisableOutboundSnat)
		}
		return tag, snatOff, nil
	}
	want := func(tag string, snatOff bool) framework.Condition {
		return func(ctx context.Context) (bool, error) {
			got, rules, err := lbSettings(ctx)
			if err != nil {
				return false, err
			}
			if got != tag || len(rules) == 0 {
				return false, fmt.Errorf("LB tag env=%q, %d rules; want env=%q", got, len(rules), tag)
			}
			for _, r := range rules {
				if r != snatOff {
					return false, fmt.Errorf("rule disableOutboundSnat=%v, want %v", r, snatOff)
				}
			}
			return true, nil
		}
	}
	l.waitFor("LB tagged env=one, rules with outbound SNAT", want("one", false), lbWait)

	lease := func() (string, int32) {
		t.Helper()
		le, err := e.Kube.CoordinationV1().Leases("kube-system").Get(ctx, "cloud-controller-manager", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("lease: %v", err)
		}
		var holder string
		var transitions int32
		if le.Spec.HolderIdentity != nil {
			holder = *le.Spec.HolderIdentity
		}
		if le.Spec.LeaseTransitions != nil {
			transitions = *le.Spec.LeaseTransitions
		}
		return holder, transitions
	}
	holder, transitions := lease()
	if holder == "" {
		t.Fatal("the lease has no holder")
	}
	pid := e.CCM().PID()
	editSecret := func(d map[string]any) {
		t.Helper()
		s, err := e.Kube.CoreV1().Secrets(cloudconfig.DefaultSecretNamespace).Get(ctx, cloudconfig.DefaultSecretName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Data = secretData(d)
		if _, err := e.Kube.CoreV1().Secrets(cloudconfig.DefaultSecretNamespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	secretEvent := func(reason, mustContain string) framework.Condition {
		return func(ctx context.Context) (bool, error) {
			evs, err := e.Kube.CoreV1().Events(cloudconfig.DefaultSecretNamespace).List(ctx, metav1.ListOptions{
				FieldSelector: "involvedObject.kind=Secret,involvedObject.name=" + cloudconfig.DefaultSecretName})
			if err != nil {
				return false, err
			}
			var seen []string
			for _, ev := range evs.Items {
				if ev.Reason == reason && strings.Contains(ev.Message, mustContain) {
					t.Logf("event %s: %s", ev.Reason, ev.Message)
					return true, nil
				}
				seen = append(seen, ev.Reason)
			}
			return false, fmt.Errorf("no %s event mentioning %q on the Secret (events: %v)", reason, mustContain, seen)
		}
	}

	l.waitFor("LoginMethodsIgnored event naming the method used and the one ignored",
		secretEvent(provider.ReasonLoginMethodsIgnored, "logging in with client-secret (aadClientSecret), ignoring client-certificate (aadClientCertPath)"), lbWait)

	// A valid edit: a load balancer setting and a tag.
	edited := time.Now()
	doc["tags"] = "env=two"
	doc["disableOutboundSNAT"] = true
	editSecret(doc)
	l.waitFor("LB tagged env=two, rules without outbound SNAT", want("two", true), lbWait)
	t.Logf("valid edit in effect %s after the Secret update", time.Since(edited).Round(time.Millisecond))
	l.waitFor("CloudConfigReloaded event", secretEvent(cloudconfig.ReasonReloaded, "secret kube-system/azure-cloud-provider"), lbWait)
	assertSameLeaderAndProcess := func(when string) {
		t.Helper()
		h, tr := lease()
		if h != holder || tr != transitions {
			t.Errorf("%s: lease holder %q transitions %d, want %q %d (leadership changed)", when, h, tr, holder, transitions)
		}
		p := e.CCM()
		if p == nil || p.PID() != pid {
			t.Fatalf("%s: the CCM process changed", when)
		}
		if exited, err := p.Exited(); exited {
			t.Fatalf("%s: the CCM exited: %v", when, err)
		}
	}
	assertSameLeaderAndProcess("after the valid edit")

	// An invalid edit is refused: event naming the key, log line, the running config stays.
	bad := map[string]any{}
	for k, v := range doc {
		bad[k] = v
	}
	bad["loadBalancerSku"] = "Premium"
	bad["tags"] = "env=three"
	editSecret(bad)
	l.waitFor("CloudConfigInvalid event naming loadBalancerSku", secretEvent(cloudconfig.ReasonInvalid, `loadBalancerSku: "Premium"`), lbWait)
	log, err := os.ReadFile(e.CCMLogPath())
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`Cloud config change refused.*loadBalancerSku`).Match(log) {
		t.Error("no log line refusing the change with the key named")
	}
	// The running configuration serves a new service as before: env=two, no outbound SNAT.
	l.create(lbService("web2", nil, lbTCP(81)))
	l.waitIP("web2")
	l.waitFor("LB still tagged env=two, rules still without outbound SNAT", want("two", true), lbWait)
	lb, err := l.net.NewLoadBalancersClient().Get(ctx, l.rg, lbCluster, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(view(&lb.LoadBalancer, azurenames.ServiceLBName(l.get("web2").UID)).Rules); n == 0 {
		t.Error("web2 has no rule")
	}
	assertSameLeaderAndProcess("after the invalid edit")

	metrics, err := e.CCMMetrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The project's controllers report to the controller manager's gauge as the standard ones
	// do, and the reload's restart leaves them reported as running.
	for _, m := range []string{`azure_ccm_cloud_config_reloads_total{result="success"} 1`, `azure_ccm_cloud_config_reloads_total{result="invalid"} 1`,
		`running_managed_controllers{manager="cloud-controller-manager",name="drift-audit"} 1`} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
	assertSecretNotLogged(t, e, doc, bad)
}

// assertSecretNotLogged fails when the CCM's log shows the client secret of any of the documents
// the Secret held (raw or base64) or one of those documents as the API server sent it (its data
// is base64 in the JSON body). It first checks that the log holds response bodies at all, so a
// log that lost -v=10 cannot pass.
func assertSecretNotLogged(t *testing.T, e *framework.Env, docs ...map[string]any) {
	t.Helper()
	log, err := os.ReadFile(e.CCMLogPath())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "Response Body") {
		t.Fatalf("the CCM log (%d bytes) has no response bodies: was it run at -v=10?", len(log))
	}
	// Protobuf bodies are logged as hex dumps, 16 bytes a line: search their bytes too.
	text := string(log) + "\n" + hexDumpBytes(string(log))
	for i, d := range docs {
		secret, _ := d["aadClientSecret"].(string)
		if secret == "" {
			t.Fatal("the document has no aadClientSecret to look for")
		}
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		for what, v := range map[string]string{
			"the client secret":               secret,
			"the client secret in base64":     base64.StdEncoding.EncodeToString([]byte(secret)),
			"the Secret's data (base64)":      base64.StdEncoding.EncodeToString(b),
			"the Secret's data (JSON-quoted)": strings.Trim(strconv.Quote(string(b)), `"`),
		} {
			if strings.Contains(text, v) {
				t.Errorf("the CCM log at -v=10 shows %s of the Secret's document %d", what, i)
			}
		}
	}
}

// hexDumpLine is a line of encoding/hex.Dump output: offset, up to 16 hex bytes, the text column.
var hexDumpLine = regexp.MustCompile(`(?m)^\s*([0-9a-f]{8})  ((?:[0-9a-f]{2}  ?)+) *\|`)

// hexDumpBytes decodes every hex dump in log, each dump's bytes in one run, dumps separated by a
// newline.
func hexDumpBytes(log string) string {
	var b strings.Builder
	for _, m := range hexDumpLine.FindAllStringSubmatch(log, -1) {
		if m[1] == "00000000" {
			b.WriteByte('\n')
		}
		raw, err := hex.DecodeString(strings.ReplaceAll(m[2], " ", ""))
		if err == nil {
			b.Write(raw)
		}
	}
	return b.String()
}
