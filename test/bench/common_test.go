//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/test/bench/report"
	"github.com/azure-ccm/azure-ccm/test/framework"
)

// overrides records the BENCH_* variables a run set, so its result says it was reduced.
var (
	overridesMu sync.Mutex
	overrides   = map[string]string{}
)

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil && v > 0 {
		if v != def {
			overridesMu.Lock()
			overrides[key] = strconv.Itoa(v)
			overridesMu.Unlock()
		}
		return v
	}
	return def
}

// reducedBy lists the overrides among keys that changed a default.
func reducedBy(keys ...string) []string {
	overridesMu.Lock()
	defer overridesMu.Unlock()
	var out []string
	for _, k := range keys {
		if v, ok := overrides[k]; ok {
			out = append(out, k+"="+v)
		}
	}
	sort.Strings(out)
	return out
}

// resultsDir is where scenarios write their JSON: $AZURE_CCM_PERF_RESULTS (hack/bench.sh sets
// docs/performance/results), else _output/bench/results so that ad-hoc runs never overwrite
// the published figures.
func resultsDir() string {
	if d := os.Getenv("AZURE_CCM_PERF_RESULTS"); d != "" {
		return d
	}
	return filepath.Join(framework.RepoRoot(), "_output", "bench", "results")
}

// newResult starts a scenario's result; command is the `go test` line that reproduces it.
func newResult(scenario, title, testName string, sizeKeys ...string) *report.Result {
	cmd := "make bench BENCH_FLAGS='-run ^" + testName + "$'"
	r := &report.Result{Scenario: scenario, Title: title, Command: cmd, Date: time.Now().UTC(),
		Machine: machine(), Config: map[string]string{}}
	if red := reducedBy(sizeKeys...); len(red) > 0 {
		r.Reduced = true
		r.Command = strings.Join(red, " ") + " " + cmd
	}
	return r
}

// machine describes the host: CPU model and count, memory.
func machine() string {
	model := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0]); len(f) >= 2 {
			if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
				mem = fmt.Sprintf(", %.0f GiB", kb/(1<<20))
			}
		}
	}
	return fmt.Sprintf("%d CPUs (%s)%s, shared with other work", runtime.NumCPU(), model, mem)
}

func writeResult(t *testing.T, r *report.Result) {
	t.Helper()
	path, err := report.Write(resultsDir(), r)
	if err != nil {
		t.Errorf("result: %v", err)
		return
	}
	t.Logf("result written to %s", path)
}

// meter measures one phase: ARM counters (azsim's, reset at the start), the CCM's CPU time
// and throttled time (deltas, or the whole life of a CCM started during the phase) and its
// peak RSS.
type meter struct {
	b     *bench
	began time.Time
	pid   int
	cpu0  float64
	thr0  float64
}

func (b *bench) meter() *meter {
	b.resetStats()
	m := &meter{b: b, began: time.Now()}
	if p := b.env.CCM(); p != nil {
		m.pid = p.PID()
		if u, err := b.env.CCMUsage(); err == nil {
			m.cpu0 = u.CPUSeconds
		}
		m.thr0 = b.throttledSeconds()
	}
	return m
}

func (b *bench) throttledSeconds() float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	text, err := b.env.CCMMetrics(ctx)
	if err != nil {
		b.t.Logf("CCM metrics: %v", err)
		return 0
	}
	return report.SumMetric(text, "azure_ccm_arm_throttled_seconds_total")
}

// phase closes the measurement; seconds is the scenario's time to converge.
func (m *meter) phase(name, variant string, seconds float64) report.Phase {
	s := m.b.stats()
	by, total := report.ARMCounts(s)
	p := report.Phase{Name: name, Variant: variant, Seconds: seconds, ARM: by, ARMTotal: total,
		Throttled429: report.Status429(s), Metrics: map[string]float64{}}
	if proc := m.b.env.CCM(); proc != nil {
		if u, err := m.b.env.CCMUsage(); err == nil {
			cpu, thr := u.CPUSeconds-m.cpu0, m.b.throttledSeconds()-m.thr0
			if proc.PID() != m.pid { // restarted during the phase: its whole life
				cpu, thr = u.CPUSeconds, m.b.throttledSeconds()
			}
			p.CCM = &report.Usage{CPUSeconds: cpu, PeakRSSMiB: float64(u.PeakRSSBytes) / (1 << 20)}
			p.ThrottledSeconds = thr
		}
	}
	return p
}

// waitNodesInitialized waits until n nodes exist and none carries the uninitialized taint.
func (b *bench) waitNodesInitialized(n int, timeout time.Duration) {
	b.env.WaitFor(fmt.Sprintf("%d nodes initialized", n), func(ctx context.Context) (bool, error) {
		nodes, err := b.env.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, err
		}
		left := 0
		for _, n := range nodes.Items {
			for _, taint := range n.Spec.Taints {
				if taint.Key == framework.UninitializedTaintKey {
					left++
				}
			}
		}
		return left == 0 && len(nodes.Items) == n, fmt.Errorf("%d of %d nodes uninitialized", left, len(nodes.Items))
	}, timeout)
}

// poolAddresses reads a nodeIP backend pool's addresses and their admin states.
func (b *bench) poolAddresses(ctx context.Context, lb, pool string) (map[string]string, error) {
	id := fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/loadBalancers/%s/backendAddressPools/%s",
		b.env.Azure.SubscriptionID, b.env.Azure.ResourceGroup, lb, pool)
	doc, err := b.env.Azsim.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	props, _ := doc["properties"].(map[string]any)
	addrs, _ := props["loadBalancerBackendAddresses"].([]any)
	for _, a := range addrs {
		ap, _ := a.(map[string]any)["properties"].(map[string]any)
		ip, _ := ap["ipAddress"].(string)
		st, _ := ap["adminState"].(string)
		out[ip] = st
	}
	return out, nil
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// ccmBinary is $AZURE_CCM_BENCH_CCM: a copy of the CCM that a rebuild of _output/bin cannot
// replace in the middle of a long run ("" = the framework's default, _output/bin).
func ccmBinary() string { return os.Getenv("AZURE_CCM_BENCH_CCM") }

// nodeIPConfig is the azure.json of scenarios on IP-based pools.
func nodeIPConfig() map[string]any {
	return map[string]any{"loadBalancerBackendPoolConfigurationType": "nodeIP"}
}

// clusterArgs widen the service range: kube-apiserver's default /24 holds only 254 Services.
var clusterArgs = []string{"kube-apiserver=service-cluster-ip-range=10.96.0.0/16"}

// markShutDown makes the machines' nodes NotReady, as the nodes of stopped VMs become, before
// a bench puts the out-of-service taint on them: on a Ready node the node-out-of-service
// controller takes that taint away again, as the existing provider does.
func markShutDown(e *framework.Env, ms []framework.Machine) {
	for _, m := range ms {
		e.WaitFor("node "+m.NodeName+" NotReady", framework.NodeNotReady(e.Kube, m.NodeName), time.Minute)
	}
}
