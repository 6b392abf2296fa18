package report

import (
	"strings"
	"testing"
	"time"

	"github.com/azure-ccm/azure-ccm/internal/azsim/middleware"
)

func TestSumMetric(t *testing.T) {
	text := `# HELP azure_ccm_arm_throttled_seconds_total x
azure_ccm_arm_throttled_seconds_total{class="read"} 1.5
azure_ccm_arm_throttled_seconds_total{class="write"} 2
azure_ccm_arm_throttled_seconds_total_extra 100
azure_ccm_arm_throttle_events_total{class="write",reason="429"} 3
plain_metric 7
`
	for _, c := range []struct {
		name string
		want float64
	}{
		{"azure_ccm_arm_throttled_seconds_total", 3.5},
		{"azure_ccm_arm_throttle_events_total", 3},
		{"plain_metric", 7},
		{"absent", 0},
		{"azure_ccm_arm", 0},
	} {
		if got := SumMetric(text, c.name); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

func TestPercentile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	for _, c := range []struct{ p, want float64 }{{50, 5}, {99, 10}, {100, 10}, {10, 1}, {0, 1}} {
		if got := Percentile(xs, c.p); got != c.want {
			t.Errorf("p%v: got %v, want %v", c.p, got, c.want)
		}
	}
	if Percentile(nil, 50) != 0 {
		t.Error("empty: want 0")
	}
}

func TestShortTypeAndOf(t *testing.T) {
	for in, want := range map[string]string{
		"Microsoft.Network/loadBalancers/backendAddressPools": "loadBalancers/backendAddressPools",
		"Microsoft.Network/loadBalancers":                     "loadBalancers",
		"other":                                               "other",
	} {
		if got := ShortType(in); got != want {
			t.Errorf("ShortType(%q) = %q, want %q", in, got, want)
		}
	}
	by, total := ARMCounts(middleware.Stats{Requests: []middleware.Count{
		{Method: "PUT", ResourceType: "Microsoft.Network/loadBalancers", Class: middleware.Write, Status: 201, Count: 3},
		{Method: "GET", ResourceType: "Microsoft.Network/loadBalancers", Class: middleware.Read, Status: 200, Count: 10},
		{Method: "POST", ResourceType: "Microsoft.Compute/virtualMachineScaleSets", Class: middleware.Action, Status: 202, Count: 2},
		{Method: "DELETE", ResourceType: "Microsoft.Network/publicIPAddresses", Class: middleware.Delete, Status: 200, Count: 4},
		{Method: "PUT", ResourceType: "Microsoft.Network/loadBalancers", Class: middleware.Write, Status: 429, Count: 1},
	}})
	p := Phase{ARM: by, ARMTotal: total}
	if got := p.Of("loadBalancers"); got != (Counts{Reads: 10, Writes: 4}) {
		t.Errorf("LB: %+v", got)
	}
	if got := p.Of("Microsoft.Network/publicIPAddresses"); got != (Counts{Deletes: 4}) {
		t.Errorf("PIP: %+v", got)
	}
	if got := p.Of("virtualMachineScaleSets"); got != (Counts{Writes: 2}) {
		t.Errorf("VMSS actions count as writes: %+v", got)
	}
	if total != (Counts{Reads: 10, Writes: 6, Deletes: 4}) {
		t.Errorf("total %+v", total)
	}
	if n := Status429(middleware.Stats{Requests: []middleware.Count{{Status: 429, Count: 2}, {Status: 200, Count: 5}}}); n != 2 {
		t.Errorf("429s: %d", n)
	}
}

func sample() *Result {
	return &Result{
		Scenario: "lb-burst", Title: "Burst of services", Command: "make bench", Date: time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC),
		Machine: "2 cores", Config: map[string]string{"nodes": "200"},
		Phases: []Phase{
			{Name: "burst", Variant: "ours", Seconds: 30, ARM: map[string]Counts{"Microsoft.Network/loadBalancers": {Reads: 5, Writes: 12}},
				ARMTotal: Counts{Reads: 5, Writes: 12}, CCM: &Usage{CPUSeconds: 4, PeakRSSMiB: 80},
				Series: []Series{{X: []float64{0, 10, 30}, Y: []float64{0, 100, 300}}}, Metrics: map[string]float64{"p99 s": 1.25}},
			{Name: "burst", Variant: "baseline", Seconds: 700, ARM: map[string]Counts{"Microsoft.Network/loadBalancers": {Reads: 600, Writes: 300}},
				ARMTotal: Counts{Reads: 600, Writes: 300}},
		},
		Goals:    []Goal{{Name: "LB writes", Want: "≤ 20", Got: "12", Met: true}, {Name: "speed", Want: "≥ 10×", Got: "9×"}},
		Headline: []string{"23× faster"},
	}
}

func TestRender(t *testing.T) {
	md, plots := Render([]*Result{sample()})
	for _, want := range []string{
		"## Burst of services", "Command: `make bench`", "| burst | ours | 30 | 12 |", "| burst | baseline | 700 | 300 |",
		"| p99 s | 1.25 |", "| speed | ≥ 10× | 9× | **no** |", "**Burst of services**: 23× faster",
		"![Burst of services: ARM writes per phase](plots/lb-burst-writes.png)", "Goals missed in these runs",
		"| 80 |", "(#burst-of-services)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	var files []string
	for _, p := range plots {
		files = append(files, p.File)
	}
	if got := strings.Join(files, ","); got != "plots/lb-burst-progress.png,plots/lb-burst-writes.png,plots/lb-burst-time.png" {
		t.Errorf("plots: %s", got)
	}
	// Drawing is tested in test/bench/perfreport (the plotting library's own module).
}

func TestRenderResources(t *testing.T) {
	r := &Result{Scenario: "multislb-scale", Title: "Many LBs", Phases: []Phase{{Name: "1000 services", Variant: "ours", Seconds: 60,
		Resources: map[string]Counts{"loadBalancers/lb-2": {Reads: 40, Writes: 7}, "loadBalancers/kubernetes": {Reads: 50, Writes: 9, Deletes: 1}}}}}
	md, plots := Render([]*Result{r})
	for _, want := range []string{"| phase | variant | resource | reads | writes | deletes |",
		"| 1000 services | ours | loadBalancers/kubernetes | 50 | 9 | 1 |\n| 1000 services | ours | loadBalancers/lb-2 | 40 | 7 | 0 |",
		"](plots/multislb-scale-resources.png)"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	var p *Plot
	for i := range plots {
		if plots[i].File == "plots/multislb-scale-resources.png" {
			p = &plots[i]
		}
	}
	if p == nil {
		t.Fatalf("no resource plot among %d", len(plots))
	}
	if strings.Join(p.Groups, ",") != "loadBalancers/kubernetes,loadBalancers/lb-2" || p.Values[1][0] != 7 || p.Values[0][1] != 1 {
		t.Errorf("resource plot %+v", p)
	}
	// Results without resource counts render as before.
	if md, _ := Render([]*Result{sample()}); strings.Contains(md, "| resource |") {
		t.Error("resource table in a result without resource counts")
	}
}

func TestWriteLoadOrder(t *testing.T) {
	dir := t.TempDir()
	for _, s := range []string{"zzz", "azsim", "lb-burst"} {
		r := sample()
		r.Scenario = s
		if _, err := Write(dir, r); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rs {
		got = append(got, r.Scenario)
	}
	if strings.Join(got, ",") != "lb-burst,azsim,zzz" {
		t.Errorf("order %v", got)
	}
	if rs[0].Phases[0].CCM.PeakRSSMiB != 80 || len(rs[0].Phases[0].Series[0].Y) != 3 {
		t.Errorf("round trip lost data: %+v", rs[0].Phases[0])
	}
	if _, err := Write(dir, &Result{}); err == nil {
		t.Error("result without scenario written")
	}
}
