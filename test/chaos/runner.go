// Package chaos runs randomized, seeded workloads against the CCM while azsim injects ARM
// faults and the CCM is restarted, and then checks that Azure ends up exactly as the cluster
// asks: every service served, nothing orphaned, nothing the user owns touched.
//
// `make chaos` runs the long variant (build tag chaos, CHAOS_* env); `make test` a short one.
package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/azure-ccm/azure-ccm/internal/azsim/client"
	"github.com/azure-ccm/azure-ccm/internal/azsim/middleware"
	"github.com/azure-ccm/azure-ccm/test/framework"
)

// Options of one chaos run.
type Options struct {
	Seed uint64
	// Duration of the random phase (faults and restarts on).
	Duration time.Duration
	// FaultRate is the share of ARM requests that fail (429, 412, 500, failed LRO in equal parts).
	FaultRate float64
	// RestartEvery restarts the CCM (alternately SIGTERM and SIGKILL); 0 never.
	RestartEvery time.Duration
	// MaxServices bounds the number of LoadBalancer services alive at once.
	MaxServices int
	// Nodes is the scale set's capacity (each instance is a node).
	Nodes int
	// ConvergeTimeout bounds the wait for the invariants once faults stop.
	ConvergeTimeout time.Duration
	// PoolType is azure.json's loadBalancerBackendPoolConfigurationType.
	PoolType string
	// DriftPercent is the share of steps (0–100) that make a third party's edit of a service's
	// Azure objects (azsim drift), which the CCM's drift audit must repair.
	DriftPercent int
	// PIPGroupPercent is the share of service updates (0–100) that move a public service's
	// managed public IP to the other resource group (the resource-group annotation set or
	// removed): the public IP left behind must be released.
	PIPGroupPercent int
}

// OptionsFromEnv overrides defaults with CHAOS_SEED, CHAOS_DURATION, CHAOS_FAULT_RATE,
// CHAOS_RESTART_EVERY, CHAOS_MAX_SERVICES, CHAOS_NODES, CHAOS_POOL_TYPE, CHAOS_DRIFT_PERCENT,
// CHAOS_PIP_GROUP_PERCENT.
func OptionsFromEnv(t *testing.T, o Options) Options {
	env := func(k string) string { return os.Getenv("CHAOS_" + k) }
	var err error
	if v := env("SEED"); v != "" {
		if o.Seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("CHAOS_SEED: %v", err)
		}
	}
	for k, d := range map[string]*time.Duration{"DURATION": &o.Duration, "RESTART_EVERY": &o.RestartEvery} {
		if v := env(k); v != "" {
			if *d, err = time.ParseDuration(v); err != nil {
				t.Fatalf("CHAOS_%s: %v", k, err)
			}
		}
	}
	if v := env("FAULT_RATE"); v != "" {
		if o.FaultRate, err = strconv.ParseFloat(v, 64); err != nil {
			t.Fatalf("CHAOS_FAULT_RATE: %v", err)
		}
	}
	for k, n := range map[string]*int{"MAX_SERVICES": &o.MaxServices, "NODES": &o.Nodes, "DRIFT_PERCENT": &o.DriftPercent,
		"PIP_GROUP_PERCENT": &o.PIPGroupPercent} {
		if v := env(k); v != "" {
			if *n, err = strconv.Atoi(v); err != nil {
				t.Fatalf("CHAOS_%s: %v", k, err)
			}
		}
	}
	if v := env("POOL_TYPE"); v != "" {
		o.PoolType = v
	}
	return o
}

// driftAuditPeriod is the CCM's --drift-audit-period in chaos runs: short, so that drift made
// late in the run is repaired within the convergence wait.
const driftAuditPeriod = 5 * time.Second

const (
	namespace    = "chaos"
	clusterName  = "kubernetes"
	userPIPName  = "user-owned-pip"
	userLBName   = "user-owned-lb"
	userRuleName = "user-allow-ssh"
	excludeLabel = "node.kubernetes.io/exclude-from-external-load-balancers"
	annInternal  = "service.beta.kubernetes.io/azure-load-balancer-internal"
	annPIPName   = "service.beta.kubernetes.io/azure-pip-name"
	annIdle      = "service.beta.kubernetes.io/azure-load-balancer-tcp-idle-timeout"
	annPLS       = "service.beta.kubernetes.io/azure-pls-create"
	annPIPGroup  = "service.beta.kubernetes.io/azure-load-balancer-resource-group"
	// pipGroup is the resource group public services move their public IPs to and back from.
	pipGroup    = "rg-chaos-pips"
	userPLSName = "user-owned-pls"
	// maxPLS keeps the run's private link services under Azure's 8 per load balancer (the
	// internal one holds them all, the user's too).
	maxPLS = 5
)

// run is the state of one chaos run.
type run struct {
	t    *testing.T
	o    Options
	e    *framework.Env
	rng  *rand.Rand
	args []string

	next int
	ops  map[string]int
	// attempts counts the restarts begun, restarts those that replaced the CCM; restartErrs
	// says why the others did not.
	attempts, restarts int
	restartErrs        []string
	userPIP            bool // a service currently names the user's public IP
}

// Run executes one chaos run and fails t if an invariant does not hold in the end.
func Run(t *testing.T, o Options) {
	bin := filepath.Join(framework.BinDir(), framework.CCMBinaryName)
	if _, err := os.Stat(bin); err != nil {
		if framework.InCI() {
			t.Fatalf("%s not built (make build): %v", bin, err)
		}
		t.Skipf("%s not built (make build)", bin)
	}
	if o.PoolType == "" {
		o.PoolType = "nodeIP"
	}
	topo := framework.DefaultTopology()
	topo.ScaleSets[0].Capacity = o.Nodes
	topo.ResourceGroups = append(topo.ResourceGroups, pipGroup)
	e := framework.Start(t, framework.Options{Topology: topo, CloudConfig: map[string]any{
		"loadBalancerBackendPoolConfigurationType": o.PoolType,
		"loadBalancerCacheTTLInSeconds":            5,
	}})
	r := &run{t: t, o: o, e: e, rng: rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15)), ops: map[string]int{}}
	t.Logf("chaos: seed %d (replay with CHAOS_SEED=%d), duration %s, fault rate %.2f, restart every %s, %d nodes, ≤%d services, %s pools, %d%% drift steps, %d%% public IP group moves",
		o.Seed, o.Seed, o.Duration, o.FaultRate, o.RestartEvery, o.Nodes, o.MaxServices, o.PoolType, o.DriftPercent, o.PIPGroupPercent)

	ctx := context.Background()
	user := seedUserResources(t, e)
	if _, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := framework.CreateNodes(ctx, e.Kube, framework.NodeOptions{ProviderID: true}, e.Machines...); err != nil {
		t.Fatal(err)
	}
	r.args = []string{"--controllers=service,cloud-node,cloud-node-lifecycle,drift-audit", "--concurrent-service-syncs=10", "--node-monitor-period=5s",
		"--drift-audit-period=" + driftAuditPeriod.String()}
	e.StartCCM(r.args...)
	for _, m := range e.Machines {
		e.WaitFor("node "+m.NodeName+" initialised", e.NodeInitialized(m.NodeName), 2*time.Minute)
	}

	obsCtx, stopObserving := context.WithCancel(ctx)
	defer stopObserving()
	go r.observe(obsCtx, user.nsgID, 250*time.Millisecond)
	faultIDs := r.injectFaults(ctx)
	began := time.Now()
	// Restart k is due k·RestartEvery after the start, for every such moment within the run.
	planned, next := plannedRestarts(o), 1
	for time.Since(began) < o.Duration {
		r.step(ctx)
		for ; next <= planned && time.Since(began) >= time.Duration(next)*o.RestartEvery; next++ {
			r.restart()
		}
		// The pace of the steps, not a wait for anything.
		time.Sleep(time.Duration(100+r.rng.IntN(600)) * time.Millisecond)
	}
	// A restart that fell due during the last pause.
	for ; next <= planned; next++ {
		r.restart()
	}
	hits := r.faultHits(ctx, faultIDs)
	if err := e.Azsim.ClearFaults(ctx); err != nil {
		t.Fatal(err)
	}
	// The run exercised what it was asked to: every fault kind hit requests, and every
	// scheduled restart replaced the CCM.
	for _, kind := range faultKinds(o) {
		if hits[kind] == 0 {
			t.Errorf("chaos: the %s fault was injected for the whole run but hit no request (hits %s)", kind, formatCounts(hits))
		}
	}
	if r.restarts != planned {
		t.Errorf("chaos: %d CCM restarts scheduled, %d happened: %v", planned, r.restarts, r.restartErrs)
	}
	// A CCM that a restart left dead would make the check below wait for nothing.
	if p := e.CCM(); p != nil {
		if exited, err := p.Exited(); exited {
			t.Fatalf("the CCM exited by itself: %v (log %s)", err, e.CCMLogPath())
		}
	}

	converge := time.Now()
	var last error
	e.WaitFor("Azure state equals the desired state", func(ctx context.Context) (bool, error) {
		last = checkInvariants(ctx, e, user)
		return last == nil, last
	}, o.ConvergeTimeout)
	stats, _ := e.Azsim.Stats(ctx)
	t.Logf("chaos: converged %s after the faults stopped; operations %s; restarts %d; faults hit %s; ARM requests %s; drift audit since the last restart: %s",
		time.Since(converge).Round(time.Second), formatCounts(r.ops), r.restarts, formatCounts(hits), summarizeStats(stats), driftRepairs(ctx, r))
}

// faultRules are the run's fault rules by fault kind (none when the fault rate is 0): a rule
// with a quarter of the fault rate, and one that hits the first request the kind applies to,
// so that every kind is exercised however few requests a short run makes.
func faultRules(o Options) map[string][]client.Fault {
	if o.FaultRate <= 0 {
		return nil
	}
	q := o.FaultRate / 4
	kinds := map[string]client.Fault{
		"429":        {Kind: middleware.FaultThrottle, RetryAfterSeconds: 1},
		"412":        {Kind: middleware.FaultPrecondition, Class: middleware.Write},
		"500":        {Kind: middleware.FaultError, Status: 500, Code: "InternalServerError", Message: "chaos"},
		"failed LRO": {Kind: middleware.FaultLROFailed, Class: middleware.Write},
	}
	out := map[string][]client.Fault{}
	for name, f := range kinds {
		first, rate := f, f
		first.Count, rate.Rate = 1, q
		out[name] = []client.Fault{first, rate}
	}
	return out
}

// faultKinds names the fault kinds a run with o injects, sorted.
func faultKinds(o Options) []string {
	var out []string
	for name := range faultRules(o) {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// plannedRestarts is the number of CCM restarts a run with o makes: one every RestartEvery
// within Duration.
func plannedRestarts(o Options) int {
	if o.RestartEvery <= 0 {
		return 0
	}
	return int((o.Duration - 1) / o.RestartEvery)
}

// injectFaults adds the fault rules and returns their IDs by fault kind.
func (r *run) injectFaults(ctx context.Context) map[string][]string {
	ids := map[string][]string{}
	for name, rules := range faultRules(r.o) {
		for _, f := range rules {
			added, err := r.e.Azsim.AddFault(ctx, f)
			if err != nil {
				r.t.Fatalf("add fault %s: %v", name, err)
			}
			ids[name] = append(ids[name], added.ID)
		}
	}
	return ids
}

// faultHits sums the hits of each fault kind's rules.
func (r *run) faultHits(ctx context.Context, ids map[string][]string) map[string]int {
	out := map[string]int{}
	faults, err := r.e.Azsim.Faults(ctx)
	if err != nil {
		r.t.Logf("chaos: faults: %v", err)
		return out
	}
	for name, kindIDs := range ids {
		for _, f := range faults {
			if slices.Contains(kindIDs, f.ID) {
				out[name] += f.Hits
			}
		}
	}
	return out
}

// step performs one random operation on services or nodes.
func (r *run) step(ctx context.Context) {
	svcs, err := r.e.Kube.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		r.t.Logf("chaos: list services: %v", err)
		return
	}
	n := len(svcs.Items)
	// No random draw without drift: the runs of seeds from before drift steps replay as they were.
	if n > 0 && r.o.DriftPercent > 0 && r.rng.IntN(100) < r.o.DriftPercent {
		r.injectDrift(ctx, svcs.Items)
		return
	}
	switch p := r.rng.IntN(100); {
	case p < 35 && n < r.o.MaxServices, n == 0:
		r.createService(ctx)
	case p < 65:
		r.updateService(ctx, &svcs.Items[r.rng.IntN(n)])
	case p < 85:
		r.deleteService(ctx, &svcs.Items[r.rng.IntN(n)])
	default:
		r.toggleNode(ctx)
	}
}

func (r *run) ports() []corev1.ServicePort {
	choices := []corev1.ServicePort{
		{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP},
		{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP},
		{Name: "alt", Port: 8080, Protocol: corev1.ProtocolTCP},
		{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
	}
	r.rng.Shuffle(len(choices), func(i, j int) { choices[i], choices[j] = choices[j], choices[i] })
	out := choices[:1+r.rng.IntN(2)]
	for i := range out {
		out[i].TargetPort = intstr.FromInt32(out[i].Port)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Port < out[j].Port })
	return append([]corev1.ServicePort(nil), out...)
}

func (r *run) createService(ctx context.Context) {
	r.next++
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%d", r.next), Namespace: namespace, Annotations: map[string]string{}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: r.ports(), Selector: map[string]string{"app": "x"}},
	}
	switch p := r.rng.IntN(10); {
	case p < 3:
		svc.Annotations[annInternal] = "true"
		if r.rng.IntN(2) == 0 && r.plsCount(ctx) < maxPLS {
			svc.Annotations[annPLS] = "true"
		}
	case p < 4 && !r.userPIP:
		svc.Annotations[annPIPName] = userPIPName
		r.userPIP = true
	}
	created, err := r.e.Kube.CoreV1().Services(namespace).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		r.t.Logf("chaos: create %s: %v", svc.Name, err)
		return
	}
	r.journal("create %s uid=%s annotations=%v ports=%v", svc.Name, created.UID, svc.Annotations, portList(svc.Spec.Ports))
	r.ops["create"]++
}

func (r *run) updateService(ctx context.Context, svc *corev1.Service) {
	svc = svc.DeepCopy()
	if svc.Annotations == nil {
		svc.Annotations = map[string]string{}
	}
	what := ""
	// No random draw without group moves: the runs of seeds from before them replay as they were.
	movable := svc.Annotations[annInternal] != "true" && svc.Annotations[annPIPName] == ""
	if r.o.PIPGroupPercent > 0 && movable && r.rng.IntN(100) < r.o.PIPGroupPercent {
		if _, ok := svc.Annotations[annPIPGroup]; ok {
			delete(svc.Annotations, annPIPGroup)
		} else {
			svc.Annotations[annPIPGroup] = pipGroup
		}
		r.finishUpdate(ctx, svc, "public IP resource group")
		return
	}
	switch r.rng.IntN(4) {
	case 3:
		// Private link service on and off (internal services only; public ones would need
		// floating IP disabled).
		if svc.Annotations[annInternal] != "true" {
			return
		}
		if svc.Annotations[annPLS] == "true" {
			delete(svc.Annotations, annPLS)
		} else if r.plsCount(ctx) < maxPLS {
			svc.Annotations[annPLS] = "true"
		} else {
			return
		}
		what = "private link service"
	case 0:
		svc.Spec.Ports, what = r.ports(), "ports"
	case 1:
		if len(svc.Spec.LoadBalancerSourceRanges) > 0 {
			svc.Spec.LoadBalancerSourceRanges = nil
		} else {
			svc.Spec.LoadBalancerSourceRanges = []string{fmt.Sprintf("203.0.%d.0/24", r.rng.IntN(250))}
		}
		what = "source ranges"
	default:
		if _, ok := svc.Annotations[annIdle]; ok {
			delete(svc.Annotations, annIdle)
		} else {
			svc.Annotations[annIdle] = strconv.Itoa(4 + r.rng.IntN(26))
		}
		what = "idle timeout"
	}
	r.finishUpdate(ctx, svc, what)
}

// finishUpdate writes the updated service and journals it.
func (r *run) finishUpdate(ctx context.Context, svc *corev1.Service, what string) {
	// Node ports are kept by the API server only when they are sent back.
	for i := range svc.Spec.Ports {
		svc.Spec.Ports[i].NodePort = 0
	}
	if _, err := r.e.Kube.CoreV1().Services(namespace).Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			r.t.Logf("chaos: update %s (%s): %v", svc.Name, what, err)
		}
		return
	}
	r.ops["update "+what]++
	r.journal("update %s %s ports=%v ranges=%v annotations=%v", svc.Name, what, portList(svc.Spec.Ports), svc.Spec.LoadBalancerSourceRanges, svc.Annotations)
}

// plsCount counts the services that ask for a private link service.
func (r *run) plsCount(ctx context.Context) int {
	svcs, err := r.e.Kube.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return maxPLS
	}
	n := 0
	for _, s := range svcs.Items {
		if s.Annotations[annPLS] == "true" {
			n++
		}
	}
	return n
}

func (r *run) deleteService(ctx context.Context, svc *corev1.Service) {
	if err := r.e.Kube.CoreV1().Services(namespace).Delete(ctx, svc.Name, metav1.DeleteOptions{}); err != nil {
		r.t.Logf("chaos: delete %s: %v", svc.Name, err)
		return
	}
	if svc.Annotations[annPIPName] == userPIPName {
		// The user's IP is free again once the old service's finalizer is gone.
		r.waitGone(ctx, svc.Name)
		r.userPIP = false
	}
	r.ops["delete"]++
	r.journal("delete %s uid=%s", svc.Name, svc.UID)
}

// waitGone waits (bounded) for a deleted service's finalizer to be removed.
func (r *run) waitGone(ctx context.Context, name string) {
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if _, err := r.e.Kube.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (r *run) toggleNode(ctx context.Context) {
	m := r.e.Machines[r.rng.IntN(len(r.e.Machines))]
	n, err := r.e.Kube.CoreV1().Nodes().Get(ctx, m.NodeName, metav1.GetOptions{})
	if err != nil {
		r.t.Logf("chaos: get node %s: %v", m.NodeName, err)
		return
	}
	op := "exclude node"
	if _, ok := n.Labels[excludeLabel]; ok {
		delete(n.Labels, excludeLabel)
		op = "include node"
	} else {
		n.Labels[excludeLabel] = "true"
	}
	if _, err := r.e.Kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		if !apierrors.IsConflict(err) {
			r.t.Logf("chaos: %s %s: %v", op, m.NodeName, err)
		}
		return
	}
	r.ops[op]++
	r.journal("%s %s", op, m.NodeName)
}

// restart stops the CCM gracefully or kills it, alternately, and starts it again. It counts
// the restart once the old process has exited and a new one answers on the CCM's port, and
// records why otherwise.
func (r *run) restart() {
	r.attempts++
	old := r.e.CCM()
	if old == nil {
		r.restartErrs = append(r.restartErrs, fmt.Sprintf("restart %d: no CCM running", r.attempts))
		return
	}
	what := "restarted"
	if r.attempts%2 == 0 {
		_ = syscall.Kill(-old.PID(), syscall.SIGKILL)
		<-old.Done()
		_ = r.e.StopCCM() // reports the kill as an unexpected exit
		r.e.StartCCM(r.args...)
		what = "killed and started"
	} else {
		r.e.RestartCCM()
	}
	r.ops["ccm "+what]++
	r.journal("ccm %s", what)
	if err := r.checkRestarted(old); err != nil {
		r.restartErrs = append(r.restartErrs, fmt.Sprintf("restart %d (%s): %v", r.attempts, what, err))
		return
	}
	r.restarts++
}

// checkRestarted holds when the CCM process old has exited and another one serves.
func (r *run) checkRestarted(old *framework.Process) error {
	select {
	case <-old.Done():
	default:
		return fmt.Errorf("the old CCM (pid %d) still runs", old.PID())
	}
	cur := r.e.CCM()
	if cur == nil || cur.PID() == old.PID() {
		return fmt.Errorf("no new CCM process (old pid %d)", old.PID())
	}
	return r.e.Eventually(func(ctx context.Context) (bool, error) {
		_, err := r.e.CCMMetrics(ctx)
		return err == nil, err
	}, time.Minute)
}

// journal records an operation in the environment's log dir (kept with the artifacts of a
// failed run), so a failure can be matched with what the run did.
func (r *run) journal(format string, args ...any) {
	f, err := os.OpenFile(filepath.Join(r.e.Dir, "logs", "chaos-journal.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func portList(ps []corev1.ServicePort) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%s/%d", p.Protocol, p.Port))
	}
	return out
}

func formatCounts[V int | int64](m map[string]V) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// summarizeStats sums azsim's counters into reads and writes per resource type.
func summarizeStats(s client.Stats) string {
	m := map[string]int64{}
	for _, c := range s.Requests {
		kind := "read"
		if c.Method != "GET" {
			kind = "write"
		}
		typ := c.ResourceType
		if i := strings.LastIndex(typ, "/"); i >= 0 {
			typ = typ[i+1:]
		}
		m[typ+" "+kind] += c.Count
	}
	return formatCounts(m)
}
