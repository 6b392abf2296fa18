// Package report holds the benchmark results of test/bench: each scenario writes one JSON
// Result, and the generator (test/bench/perfreport, a module of its own) renders them all into docs/performance/README.md
// with tables and PNG plots.
package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/azure-ccm/azure-ccm/internal/azsim/middleware"
)

// Counts are ARM requests of one resource type (or all), by class. Writes include POST actions.
type Counts struct {
	Reads   int64 `json:"reads"`
	Writes  int64 `json:"writes"`
	Deletes int64 `json:"deletes"`
}

// Add returns c + o.
func (c Counts) Add(o Counts) Counts {
	return Counts{Reads: c.Reads + o.Reads, Writes: c.Writes + o.Writes, Deletes: c.Deletes + o.Deletes}
}

// Usage is the CCM process's consumption during a phase.
type Usage struct {
	CPUSeconds float64 `json:"cpuSeconds"`
	PeakRSSMiB float64 `json:"peakRSSMiB"`
}

// Series is a curve for a plot: Y against X (e.g. services with an IP against seconds).
type Series struct {
	Name string    `json:"name"`
	X    []float64 `json:"x"`
	Y    []float64 `json:"y"`
}

// Phase is one measured run inside a scenario: a configuration (Variant) doing one thing.
type Phase struct {
	Name string `json:"name"`
	// Variant is "ours" (the CCM as shipped) or the name of another configuration, saying
	// what it is ("1 worker, no merging"); phases with the same Name and different variants
	// are compared side by side.
	Variant string            `json:"variant"`
	Config  map[string]string `json:"config,omitempty"`
	// Seconds is the time to converge (what converging means is the scenario's to say).
	Seconds float64 `json:"seconds"`
	// ARM is azsim's counters by resource type; ARMTotal all requests.
	ARM      map[string]Counts `json:"arm"`
	ARMTotal Counts            `json:"armTotal"`
	// Resources are azsim's counters for named resources ("loadBalancers/lb-2": requests
	// addressed to it or its children), for scenarios that compare resources of one type.
	Resources map[string]Counts `json:"resources,omitempty"`
	// Throttled429 is the number of 429s azsim answered (throttling model and faults).
	Throttled429 int64 `json:"throttled429"`
	// ThrottledSeconds is the time the CCM's callers waited at its throttle gate.
	ThrottledSeconds float64 `json:"throttledSeconds"`
	CCM              *Usage  `json:"ccm,omitempty"`
	// Metrics are scenario-specific figures (latency percentiles, writes per batch, ...), in
	// the unit their name says.
	Metrics map[string]float64 `json:"metrics,omitempty"`
	Series  []Series           `json:"series,omitempty"`
	// Minimum is the fewest requests of each resource type (short name) that could do the
	// phase's work, as the scenario computes it; the report shows the counts against it.
	Minimum map[string]Counts `json:"minimum,omitempty"`
	// MinimumWhy says how Minimum was computed.
	MinimumWhy string `json:"minimumWhy,omitempty"`
}

// Goal is a budget the scenario is held to and whether this run met it.
type Goal struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	Met  bool   `json:"met"`
}

// Result is one scenario's run.
type Result struct {
	Scenario    string    `json:"scenario"` // file name: results/<scenario>.json
	Title       string    `json:"title"`
	Description string    `json:"description"`
	Command     string    `json:"command"`
	Date        time.Time `json:"date"`
	Machine     string    `json:"machine"`
	// Reduced is set when BENCH_* environment overrides shrank the scenario.
	Reduced  bool              `json:"reduced,omitempty"`
	Config   map[string]string `json:"config,omitempty"`
	Phases   []Phase           `json:"phases"`
	Goals    []Goal            `json:"goals,omitempty"`
	Headline []string          `json:"headline,omitempty"`
	Notes    []string          `json:"notes,omitempty"`
}

// ARMCounts groups azsim's counters by resource type. LRO status polls count as reads of their
// own type ("Microsoft.Network/locations/operations").
func ARMCounts(s middleware.Stats) (map[string]Counts, Counts) {
	by := map[string]Counts{}
	var total Counts
	for _, c := range s.Requests {
		var add Counts
		switch c.Class {
		case middleware.Read:
			add.Reads = c.Count
		case middleware.Delete:
			add.Deletes = c.Count
		default:
			add.Writes = c.Count
		}
		by[c.ResourceType] = by[c.ResourceType].Add(add)
		total = total.Add(add)
	}
	return by, total
}

// Status429 counts the 429 answers in s.
func Status429(s middleware.Stats) int64 { return s.Sum("", "", 429) }

// Of returns the counts of one resource type; short names ("loadBalancers") match the last
// segment of a type, case-insensitively, so both spellings work.
func (p Phase) Of(typ string) Counts {
	var out Counts
	for k, v := range p.ARM {
		if strings.EqualFold(k, typ) || strings.EqualFold(ShortType(k), typ) {
			out = out.Add(v)
		}
	}
	return out
}

// ShortType drops the provider namespace: "Microsoft.Network/loadBalancers/backendAddressPools"
// → "loadBalancers/backendAddressPools".
func ShortType(t string) string {
	if _, rest, ok := strings.Cut(t, "/"); ok && strings.Contains(t, ".") {
		return rest
	}
	return t
}

// SumMetric adds every sample of a Prometheus metric family in a text exposition (all label
// sets); 0 when absent.
func SumMetric(text, name string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue // a longer metric name
		}
		if i := strings.LastIndexByte(rest, '}'); i >= 0 {
			rest = rest[i+1:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(f[0], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// Percentile is the p-th percentile (nearest rank) of xs; 0 for none.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(p/100*float64(len(s))+0.9999999) - 1
	return s[max(0, min(rank, len(s)-1))]
}

// Write stores r as dir/<scenario>.json.
func Write(dir string, r *Result) (string, error) {
	if r.Scenario == "" {
		return "", fmt.Errorf("result without a scenario name")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, r.Scenario+".json")
	return path, os.WriteFile(path, append(b, '\n'), 0o644)
}

// Load reads every *.json result in dir, in the order of Order (others after, by name).
func Load(dir string) ([]*Result, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var out []*Result
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		r := new(Result)
		if err := json.Unmarshal(b, r); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, r)
	}
	slices.SortStableFunc(out, func(a, b *Result) int {
		ra, rb := rank(a.Scenario), rank(b.Scenario)
		if ra != rb {
			return ra - rb
		}
		return strings.Compare(a.Scenario, b.Scenario)
	})
	return out, nil
}

// Order is the report's scenario order.
var Order = []string{"lb-burst", "steady-state", "scale-set-scaling", "rolling-upgrade", "adminstate", "throttling", "throttling-gate", "large-cluster", "large-cluster-10000", "multislb-scale", "local-churn", "azsim"}

func rank(s string) int {
	if i := slices.Index(Order, s); i >= 0 {
		return i
	}
	return len(Order)
}

// CPU is the CCM's CPU seconds in the phase (0 when not measured).
func (p Phase) CPU() float64 {
	if p.CCM == nil {
		return 0
	}
	return p.CCM.CPUSeconds
}

// PeakRSS is the CCM's peak RSS in MiB (0 when not measured).
func (p Phase) PeakRSS() float64 {
	if p.CCM == nil {
		return 0
	}
	return p.CCM.PeakRSSMiB
}
