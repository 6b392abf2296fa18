package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/internal/azsim/client"
	"github.com/azure-ccm/azure-ccm/internal/azsim/drift"
	"github.com/azure-ccm/azure-ccm/internal/azsim/middleware"
	"github.com/azure-ccm/azure-ccm/test/framework/azurenames"
)

// driftPeriod is the audit period of these tests (the default is 100 s).
const driftPeriod = 3 * time.Second

// driftServices is the size of the converged cluster the drift tests start from.
const driftServices = 20

// driftStart is a cluster with IP-based pools whose CCM audits every driftPeriod.
func driftStart(t *testing.T, extraArgs ...string) *lbEnv {
	t.Helper()
	return lbStart(t, lbOptions{CloudConfig: lbNodeIPConfig,
		CCMArgs: append([]string{"--drift-audit-period=" + driftPeriod.String()}, extraArgs...)})
}

// driftMetric sums the samples of a family of the CCM's drift metrics, filtered by a label
// text (e.g. `result="in_step"`; "" for all).
func (l *lbEnv) driftMetric(ctx context.Context, family, label string) (float64, error) {
	text, err := l.CCMMetrics(ctx)
	if err != nil {
		return 0, err
	}
	sum := 0.0
	for _, line := range strings.Split(text, "\n") {
		name, _, ok := strings.Cut(line, " ")
		if !ok || (name != family && !strings.HasPrefix(name, family+"{")) || !strings.Contains(name, label) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v); err != nil {
			return 0, fmt.Errorf("%s: %w", line, err)
		}
		sum += v
	}
	return sum, nil
}

func (l *lbEnv) passes() float64 {
	l.t.Helper()
	n, err := l.driftMetric(lbCtx(l.t), "azure_ccm_drift_audit_passes_total", "")
	if err != nil {
		l.t.Fatalf("CCM metrics: %v", err)
	}
	return n
}

// waitPasses waits until n more audit passes have ended.
func (l *lbEnv) waitPasses(n int) {
	l.t.Helper()
	start := l.passes()
	l.waitFor(fmt.Sprintf("%d drift audit passes", n), func(ctx context.Context) (bool, error) {
		got, err := l.driftMetric(ctx, "azure_ccm_drift_audit_passes_total", "")
		return got >= start+float64(n), err
	}, time.Duration(n)*driftPeriod+lbWait)
}

// createServices creates n services on ports 8000+i (each its own NSG rule) and waits for
// their IPs.
func (l *lbEnv) createServices(prefix string, n int) []*corev1.Service {
	l.t.Helper()
	for i := range n {
		l.create(lbService(fmt.Sprintf("%s-%02d", prefix, i), nil, lbTCP(int32(8000+i))))
	}
	out := make([]*corev1.Service, n)
	for i := range n {
		out[i] = l.waitIP(fmt.Sprintf("%s-%02d", prefix, i))
	}
	return out
}

// lbSnapshot is the cluster's load balancing as a map from object to its JSON (etags and
// provisioning states aside), independent of the order of lists: load balancer children by
// name, NSG rules by name.
func (l *lbEnv) lbSnapshot(ctx context.Context) (map[string]string, error) {
	st, err := l.state(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	put := func(k string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		var m any
		_ = json.Unmarshal(b, &m)
		out[k] = canonJSON(m)
		return nil
	}
	for name, lb := range st.LBs {
		p := lb.Properties
		for _, f := range p.FrontendIPConfigurations {
			_ = put("lb/"+name+"/frontend/"+*f.Name, f.Properties.PublicIPAddress)
		}
		for _, r := range p.LoadBalancingRules {
			_ = put("lb/"+name+"/rule/"+*r.Name, r.Properties)
		}
		for _, pr := range p.Probes {
			_ = put("lb/"+name+"/probe/"+*pr.Name, pr.Properties)
		}
		for _, pool := range p.BackendAddressPools {
			_ = put("lb/"+name+"/pool/"+*pool.Name, poolIPs(lb, *pool.Name))
		}
	}
	for _, r := range st.NSG.Properties.SecurityRules {
		_ = put("nsg/"+*r.Name, r.Properties)
	}
	return out, nil
}

// canonJSON is JSON with etags, provisioning states and IDs of children dropped and object
// keys sorted (encoding/json sorts map keys).
func canonJSON(v any) string {
	var strip func(any) any
	strip = func(x any) any {
		switch x := x.(type) {
		case map[string]any:
			delete(x, "etag")
			delete(x, "provisioningState")
			for k, v := range x {
				x[k] = strip(v)
			}
		case []any:
			for i := range x {
				x[i] = strip(x[i])
			}
		}
		return x
	}
	b, _ := json.Marshal(strip(v))
	return string(b)
}

func diffSnapshots(want, got map[string]string) []string {
	var out []string
	for k, v := range want {
		if g, ok := got[k]; !ok {
			out = append(out, "missing "+k)
		} else if g != v {
			out = append(out, "changed "+k)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			out = append(out, "extra "+k)
		}
	}
	sort.Strings(out)
	return out
}

// writesByResource are azsim's write counts (PUT, PATCH, DELETE, POST) by addressed top-level
// resource, e.g. "loadBalancers/kubernetes".
func writesByResource(s client.Stats) map[string]int64 {
	out := map[string]int64{}
	for _, r := range s.Resources {
		if r.Class == middleware.Read {
			continue
		}
		typ := r.ResourceType[strings.LastIndex(r.ResourceType, "/")+1:]
		out[typ+"/"+r.Name] += r.Count
	}
	return out
}

// TestDriftAuditRepairsEachKindOfDrift: on a converged cluster of 20 services, each kind of
// third-party edit is repaired by the first audit pass that sees it, with one write to the
// edited resource and nothing else, and a DriftRepaired event on the service.
func TestDriftAuditRepairsEachKindOfDrift(t *testing.T) {
	working(t)
	l := driftStart(t)
	ctx := lbCtx(t)
	svcs := l.createServices("drift", driftServices)
	// Two more services share one NSG rule (same port and sources).
	l.create(lbService("shared-a", nil, lbTCP(9000)))
	l.create(lbService("shared-b", nil, lbTCP(9000)))
	sharedA, sharedB := l.waitIP("shared-a"), l.waitIP("shared-b")

	// Converged: audits of the cluster in step write nothing.
	l.waitPasses(2)
	if err := l.Azsim.ResetStats(ctx); err != nil {
		t.Fatal(err)
	}
	l.waitPasses(3)
	if w := writesByResource(l.stats()); len(w) != 0 {
		t.Fatalf("audits of a converged cluster wrote %v", w)
	}
	want, err := l.lbSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}

	lbID := l.lbID(lbCluster)
	nsgID := "/subscriptions/" + l.Azure.SubscriptionID + "/resourceGroups/" + l.rg + "/providers/Microsoft.Network/networkSecurityGroups/" + l.Azure.SecurityGroupName
	ruleTo := func(ip string) string {
		rs := nsgRulesTo(l.mustState().NSG, ip)
		if len(rs) != 1 {
			t.Fatalf("NSG rules to %s: %v, want one", ip, rs)
		}
		return rs[0]
	}
	lbName := func(i int) string { return azurenames.ServiceLBName(svcs[i].UID) }
	for _, c := range []struct {
		name      string
		svc       *corev1.Service
		req       drift.Request
		kind      string
		writes    map[string]int64 // exact writes; nil: checked by maxWrites
		maxWrites int64
	}{
		{"rule deleted", svcs[0], drift.Request{Kind: drift.DeleteRule, Resource: lbID, Name: lbName(0) + "-TCP-8000"}, "rule",
			map[string]int64{"loadBalancers/" + lbCluster: 1}, 0},
		{"probe changed", svcs[1], drift.Request{Kind: drift.ChangeProbe, Resource: lbID, Name: lbName(1) + "-TCP-8001", IntervalInSeconds: 15}, "probe",
			map[string]int64{"loadBalancers/" + lbCluster: 1}, 0},
		{"NSG rule removed", svcs[2], drift.Request{Kind: drift.RemoveNSGRule, Resource: nsgID, Name: ruleTo(ingressIPs(svcs[2])[0])}, "nsg_rule",
			map[string]int64{"networkSecurityGroups/" + l.Azure.SecurityGroupName: 1}, 0},
		{"pool member removed (the pool of every service)", svcs[3], drift.Request{Kind: drift.RemovePoolMember, Resource: lbID, Pool: lbCluster,
			Name: l.Machines[1].InternalIPs[0]}, "pool_member", map[string]int64{"loadBalancers/" + lbCluster: 1}, 0},
		{"frontend public IP changed", svcs[4], drift.Request{Kind: drift.ChangeFrontendIP, Resource: lbID, Name: lbName(4)}, "frontend",
			map[string]int64{"loadBalancers/" + lbCluster: 1}, 0},
		// Two services' repairs write one NSG rule: they run together and share the NSG's
		// batches when they land in one, else each adds its address.
		{"NSG rule shared by two services removed", sharedA, drift.Request{Kind: drift.RemoveNSGRule, Resource: nsgID,
			Name: ruleTo(ingressIPs(sharedA)[0])}, "nsg_rule", nil, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := l.with(t)
			if err := l.Azsim.ResetStats(ctx); err != nil {
				t.Fatal(err)
			}
			before := l.passes()
			began := time.Now()
			if _, err := l.Azsim.Drift(ctx, c.req); err != nil {
				t.Fatal(err)
			}
			var diff []string
			l.waitFor("the drift repaired", func(ctx context.Context) (bool, error) {
				got, err := l.lbSnapshot(ctx)
				if err != nil {
					return false, err
				}
				diff = diffSnapshots(want, got)
				return len(diff) == 0, fmt.Errorf("differs: %v", diff)
			}, 2*driftPeriod+lbWait)
			took, after := time.Since(began), l.passes()
			// The pass running when the edit landed may have read Azure before it; the next one
			// repairs it.
			if after-before > 2 {
				t.Errorf("repaired after %.0f passes ended, want at most 2", after-before)
			}
			t.Logf("%s repaired %s after the edit (audit period %s), %.0f passes ended meanwhile", c.name, took.Round(time.Millisecond), driftPeriod, after-before)
			l.waitPasses(2)
			w := writesByResource(l.stats())
			if c.writes != nil && fmt.Sprint(w) != fmt.Sprint(c.writes) {
				t.Errorf("writes %v, want %v", w, c.writes)
			}
			if c.writes == nil {
				var n int64
				for _, v := range w {
					n += v
				}
				if n < 1 || n > c.maxWrites || len(w) != 1 {
					t.Errorf("writes %v, want 1 to %d to the NSG", w, c.maxWrites)
				}
				t.Logf("%s: %v", c.name, w)
			}
			l.waitFor("DriftRepaired event on "+c.svc.Name, func(ctx context.Context) (bool, error) {
				evs, err := l.Kube.CoreV1().Events(l.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + c.svc.Name + ",reason=DriftRepaired"})
				if err != nil || len(evs.Items) == 0 {
					return false, err
				}
				return true, nil
			}, lbWait)
			found, err := l.driftMetric(ctx, "azure_ccm_drift_repaired_total", `kind="`+c.kind+`"`)
			if err != nil || found < 1 {
				t.Errorf("azure_ccm_drift_repaired_total{kind=%q} = %v (%v)", c.kind, found, err)
			}
		})
	}
	_ = sharedB
	// The third party's public IP (change-frontend-ip) is not the CCM's: left alone.
	if _, ok := l.mustState().PIPs[l.rg+"/"+lbName(4)+"-drift"]; !ok {
		t.Error("the third party's public IP was deleted")
	}
}

// lbID is the resource ID of a load balancer of the cluster's resource group.
func (l *lbEnv) lbID(name string) string {
	return "/subscriptions/" + l.Azure.SubscriptionID + "/resourceGroups/" + l.rg + "/providers/Microsoft.Network/loadBalancers/" + name
}

// TestDriftAuditSteadyState: audits of a converged cluster that nobody edits write nothing,
// however many run; a full pass plans every service at least every 11 passes. It runs one
// audit per second for DRIFT_STEADY_DURATION (default 60 s, so 60 passes; the figure in
// docs/operations.md is of DRIFT_STEADY_DURATION=10m).
func TestDriftAuditSteadyState(t *testing.T) {
	working(t)
	d := time.Minute
	if v := os.Getenv("DRIFT_STEADY_DURATION"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("DRIFT_STEADY_DURATION: %v", err)
		}
	}
	l := lbStart(t, lbOptions{CloudConfig: lbNodeIPConfig, CCMArgs: []string{"--drift-audit-period=1s"}})
	ctx := lbCtx(t)
	l.createServices("steady", driftServices)
	// Settled: the service controller's writes are over once a pass found everything in step.
	l.waitFor("a pass that found every service in step", func(ctx context.Context) (bool, error) {
		n, err := l.driftMetric(ctx, "azure_ccm_drift_audit_passes_total", `result="in_step"`)
		return n >= 1, err
	}, lbWait)
	if err := l.Azsim.ResetStats(ctx); err != nil {
		t.Fatal(err)
	}
	passes0, full0 := l.passes(), l.mustDriftMetric(`azure_ccm_drift_audit_passes_total`, `result="in_step"`)
	began := time.Now()
	l.waitPasses(int(d / time.Second))
	d = time.Since(began).Round(time.Second)
	st := l.stats()
	passes, full := l.passes()-passes0, l.mustDriftMetric(`azure_ccm_drift_audit_passes_total`, `result="in_step"`)-full0
	if w := writesByResource(st); len(w) != 0 {
		t.Errorf("%s of audits of a cluster in step wrote %v", d, w)
	}
	if errs := l.mustDriftMetric("azure_ccm_drift_audit_passes_total", `result="error"`); errs > 0 {
		t.Errorf("%.0f passes failed", errs)
	}
	// One pass in every FullEvery+1 (11) is full, so any run of n consecutive passes holds at
	// least floor(n/11) of them; how many more depends on where the window starts.
	if least := math.Floor(passes / 11); full < least {
		t.Errorf("%.0f full passes of %.0f, want at least %.0f: the fingerprint skipped too many", full, passes, least)
	}
	var reads int64
	for _, c := range st.Requests {
		if c.Method == "GET" {
			reads += c.Count
		}
	}
	t.Logf("%s, %d services: %.0f passes (%.0f planned every service, the others found nothing changed), 0 writes, %d ARM reads (%.1f per pass): %s",
		d, driftServices, passes, full, reads, float64(reads)/passes, summarizeReads(st))
}

func (l *lbEnv) mustDriftMetric(family, label string) float64 {
	l.t.Helper()
	v, err := l.driftMetric(lbCtx(l.t), family, label)
	if err != nil {
		l.t.Fatal(err)
	}
	return v
}

func summarizeReads(s client.Stats) string {
	m := map[string]int64{}
	for _, c := range s.Requests {
		if c.Method == "GET" {
			m[c.ResourceType[strings.LastIndex(c.ResourceType, "/")+1:]] += c.Count
		}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// racedRepairs is how many services of TestDriftAuditNeverResurrects are deleted while the
// audit's repair of their drift is writing, whatever the seed does with the others.
const racedRepairs = 2

// raceLRO is how long azsim keeps a load balancer write's operation running while
// TestDriftAuditNeverResurrects races repairs with deletions: the window in which the test sees
// a repair writing and deletes its service.
const raceLRO = 4 * time.Second

// TestDriftAuditNeverResurrects: while ARM is slow (2 s per write) and audits run every few
// seconds, 20 services each lose a rule to a third party and are deleted at a different moment
// of the audit cycle (before, during and after the repair of their drift). When they are gone
// nothing of any of them is left: no frontend, rule, probe, public IP or NSG rule.
//
// The first racedRepairs services are deleted while the audit's repair of their drift is
// writing (their rule back on the load balancer, that write's operation still running), so
// every run races repairs with deletions; the deletion waits for the repair and removes what it
// wrote. The test fails unless each of those repairs happened (a DriftRepaired event). The
// schedule of the others comes from DRIFT_RESURRECT_SEED (default 21; "random" seeds from the
// clock, logged so a failing schedule can be replayed), so `-count=N` with "random" tries N
// schedules.
func TestDriftAuditNeverResurrects(t *testing.T) {
	working(t)
	seed := uint64(21)
	switch v := os.Getenv("DRIFT_RESURRECT_SEED"); v {
	case "":
	case "random":
		seed = uint64(time.Now().UnixNano())
	default:
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("DRIFT_RESURRECT_SEED: %v", err)
		}
	}
	t.Logf("schedule seed %d (DRIFT_RESURRECT_SEED=%d replays it)", seed, seed)
	l := driftStart(t)
	svcs := l.createServices("gone", driftServices)
	ctx := lbCtx(t)
	if err := l.Azsim.SetLatency(ctx, client.LatencyModel{Rules: []client.LatencyRule{
		{Class: middleware.Write, Delay: middleware.Duration(2 * time.Second)},
		{Class: middleware.Delete, Delay: middleware.Duration(2 * time.Second)},
	}}); err != nil {
		t.Fatal(err)
	}
	repaired0 := l.mustDriftMetric("azure_ccm_drift_audit_services_total", `result="repaired"`)
	skipped0 := l.mustDriftMetric("azure_ccm_drift_audit_services_total", `result="skipped"`)
	lbID := l.lbID(lbCluster)
	ruleOf := func(i int) string { return azurenames.ServiceLBName(svcs[i].UID) + fmt.Sprintf("-TCP-%d", 8000+i) }

	// Repairs raced on purpose, one service at a time: nothing else writes the load balancer
	// meanwhile, so the write that brings the deleted rule back is the audit's repair.
	slow, err := l.Azsim.AddFault(ctx, client.Fault{Kind: middleware.FaultSlowLRO, Class: middleware.Write, ResourceType: "loadBalancers",
		LRODuration: middleware.Duration(raceLRO)})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range svcs[:racedRepairs] {
		ctx := lbCtx(t)
		if _, err := l.Azsim.Drift(ctx, drift.Request{Kind: drift.DeleteRule, Resource: lbID, Name: ruleOf(i)}); err != nil {
			t.Fatal(err)
		}
		l.waitFor("the audit's repair of "+s.Name+" writing", func(ctx context.Context) (bool, error) {
			lb, err := l.net.NewLoadBalancersClient().Get(ctx, l.rg, lbCluster, nil)
			if err != nil {
				return false, err
			}
			_, back := view(&lb.LoadBalancer, azurenames.ServiceLBName(s.UID)).Rules[ruleOf(i)]
			state := ""
			if lb.Properties.ProvisioningState != nil {
				state = string(*lb.Properties.ProvisioningState)
			}
			return back && state == "Updating", fmt.Errorf("rule back: %v, load balancer %s", back, state)
		}, 2*driftPeriod+lbWait)
		if err := l.Kube.CoreV1().Services(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		l.waitFor(s.Name+" gone from the API server", func(ctx context.Context) (bool, error) {
			_, err := l.Kube.CoreV1().Services(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), err
		}, lbWait)
	}
	if err := l.Azsim.RemoveFault(ctx, slow.ID); err != nil {
		t.Fatal(err)
	}

	rng := rand.New(rand.NewPCG(seed, seed))
	ctx = lbCtx(t)
	var wg sync.WaitGroup
	errs := make(chan error, len(svcs))
	for i, s := range svcs {
		if i < racedRepairs {
			continue
		}
		// Edits spread over two audit periods; each deletion follows its edit after a delay of
		// up to two periods, so deletions land before, during and after repairs.
		start := time.Duration(i-racedRepairs) * 2 * driftPeriod / driftServices
		wait := time.Duration(rng.Int64N(int64(2 * driftPeriod)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The schedule itself is what the test varies: these sleeps place the edit and the
			// deletion in the audit cycle, they do not wait for anything.
			time.Sleep(start)
			if _, err := l.Azsim.Drift(ctx, drift.Request{Kind: drift.DeleteRule, Resource: lbID, Name: ruleOf(i)}); err != nil {
				errs <- fmt.Errorf("%s: %w", s.Name, err)
				return
			}
			time.Sleep(wait)
			if err := l.Kube.CoreV1().Services(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
				errs <- fmt.Errorf("delete %s: %w", s.Name, err)
			}
			t.Logf("%s: rule deleted at +%s, service deleted %s later", s.Name, start.Round(time.Millisecond), wait.Round(time.Millisecond))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	l.waitFor("every service gone from the API server", func(ctx context.Context) (bool, error) {
		for _, s := range svcs {
			if _, err := l.Kube.CoreV1().Services(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, fmt.Errorf("%s still there (%v)", s.Name, err)
			}
		}
		return true, nil
	}, 5*time.Minute)
	// Any audit that would resurrect a service has run by now.
	l.waitPasses(2)
	st := l.mustState()
	var left []string
	for _, s := range svcs {
		svcLB := azurenames.ServiceLBName(s.UID)
		key := azurenames.ServiceKey(s.Namespace, s.Name)
		for _, lb := range st.LBs {
			if o := lbObjectsOf(lb, svcLB); len(o) > 0 {
				left = append(left, fmt.Sprintf("%s: %v on %s", s.Name, o, *lb.Name))
			}
		}
		for _, p := range st.PIPs {
			v, _ := azurenames.ServiceTagValue(p.Tags)
			if strings.Contains(*p.Name, svcLB) || slices.Contains(azurenames.ParseServiceTag(v), key) {
				left = append(left, s.Name+": public IP "+*p.Name)
			}
		}
		for _, ip := range ingressIPs(s) {
			if rs := nsgRulesTo(st.NSG, ip); len(rs) > 0 {
				left = append(left, fmt.Sprintf("%s: NSG rules %v", s.Name, rs))
			}
		}
	}
	if len(left) > 0 {
		t.Errorf("resurrected or left behind:\n%s", strings.Join(left, "\n"))
	}
	// The raced repairs happened: each service deleted while its repair was writing got its
	// DriftRepaired event (the repair ran on the service as it was before the deletion).
	for _, s := range svcs[:racedRepairs] {
		evs, err := l.Kube.CoreV1().Events(s.Namespace).List(lbCtx(t), metav1.ListOptions{FieldSelector: "involvedObject.name=" + s.Name + ",reason=DriftRepaired"})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs.Items) == 0 {
			t.Errorf("%s was deleted while a write brought its rule back, but no repair of it was reported (no DriftRepaired event)", s.Name)
		}
	}
	repaired := l.mustDriftMetric("azure_ccm_drift_audit_services_total", `result="repaired"`) - repaired0
	skipped := l.mustDriftMetric("azure_ccm_drift_audit_services_total", `result="skipped"`) - skipped0
	t.Logf("audits meanwhile: %.0f services repaired before their deletion (%d of them while it was requested), %.0f drifted services skipped (deleted or being deleted)",
		repaired, racedRepairs, skipped)
}
