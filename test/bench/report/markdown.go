package report

import (
	"fmt"
	"slices"
	"strings"
)

// Plot is a figure to draw: either bars (Groups × Bars values) or lines (Series).
type Plot struct {
	File   string // relative to the report, e.g. plots/lb-burst-writes.png
	Title  string
	XLabel string
	YLabel string
	// Bars: Values[i][j] is bar j (named Bars[j]) of group i (named Groups[i]).
	Groups []string
	Bars   []string
	Values [][]float64
	// Lines.
	Series []Series
}

// writeTypes are the resource types shown as columns of the write tables and bars of the
// write plots.
var writeTypes = []struct{ col, typ string }{
	{"LB", "loadBalancers"},
	{"pool", "loadBalancers/backendAddressPools"},
	{"NSG", "networkSecurityGroups"},
	{"PIP", "publicIPAddresses"},
	{"VMSS VM", "virtualMachineScaleSets/virtualMachines"},
	{"NIC", "networkInterfaces"},
}

// Render returns docs/performance/README.md for results and the plots it references.
func Render(results []*Result) (string, []Plot) {
	var sb strings.Builder
	var plots []Plot
	sb.WriteString("# Performance\n\n")
	sb.WriteString("Figures measured by `make bench` (hack/bench.sh → `go test -tags bench ./test/bench/...`): a real\n" +
		"kube-apiserver, controller-manager and scheduler with KWOK nodes, azsim with an ARM latency model, and the\n" +
		"CCM binary, on one machine. ARM counts come from azsim's request counters; CCM CPU and peak memory from\n" +
		"`/proc/<ccm pid>`; throttled time from the CCM's `azure_ccm_arm_throttled_seconds_total`.\n" +
		"Each scenario's JSON result is in [results/](results/); this page is generated from them by\n" +
		"`go run .` in `test/bench/perfreport` (a module of its own) — do not edit it by hand.\n\n" +
		"How to read the figures:\n\n" +
		"- **ours** is the CCM as shipped at the result's date. The other variants are the same binary with flags that\n" +
		"  switch its improvements off: **50 workers, no merging** (`--concurrent-service-syncs=50 --disable-lb-write-merging`:\n" +
		"  every service its own read-modify-write of each resource) and **1 worker, no merging** (`--concurrent-service-syncs=1\n" +
		"  --disable-lb-write-merging`: one service at a time). They are this CCM's code, not the existing provider;\n" +
		"  the last only approximates one-at-a-time reconciliation. Variants of a scenario run in the same test, one\n" +
		"  after the other, with the same number of services unless a table says otherwise.\n" +
		"- Writes are PUT/PATCH/POST requests azsim received (LRO status polls are reads); they include requests that\n" +
		"  were refused (412, 429).\n" +
		"- Times are wall-clock on a 2-core machine shared with other test runs: compare variants within a scenario\n" +
		"  rather than across runs. ARM request counts do not depend on the machine.\n" +
		"- A scenario run with `BENCH_*` size overrides is marked *reduced*; the command shown reproduces it.\n" +
		"- Runs that left no JSON result but are worth keeping are described by hand in [earlier-runs.md](earlier-runs.md).\n\n")
	if h := headlines(results); len(h) > 0 {
		sb.WriteString("## Headlines\n\n")
		for _, l := range h {
			fmt.Fprintf(&sb, "- %s\n", l)
		}
		sb.WriteString("\n")
	}
	sb.WriteString("## Scenarios\n\n")
	for _, r := range results {
		fmt.Fprintf(&sb, "- [%s](#%s)\n", r.Title, anchor(r.Title))
	}
	sb.WriteString("\n")
	for _, r := range results {
		md, ps := renderResult(r)
		sb.WriteString(md)
		plots = append(plots, ps...)
	}
	if h := headlines(results); len(h) > 0 {
		sb.WriteString("## Closing note\n\n")
		for _, l := range h {
			fmt.Fprintf(&sb, "- %s\n", l)
		}
		var missed []string
		for _, r := range results {
			for _, g := range r.Goals {
				if !g.Met {
					missed = append(missed, fmt.Sprintf("%s: %s (want %s, got %s)", r.Title, g.Name, g.Want, g.Got))
				}
			}
		}
		if len(missed) == 0 {
			sb.WriteString("\nEvery goal listed above was met in these runs.\n")
		} else {
			sb.WriteString("\nGoals missed in these runs:\n\n")
			for _, m := range missed {
				fmt.Fprintf(&sb, "- %s\n", m)
			}
		}
	}
	return sb.String(), plots
}

func headlines(results []*Result) []string {
	var out []string
	for _, r := range results {
		for _, h := range r.Headline {
			out = append(out, fmt.Sprintf("**%s**: %s", r.Title, h))
		}
	}
	return out
}

// anchor is GitHub's heading anchor: lower case, spaces to dashes, punctuation dropped.
func anchor(title string) string {
	var sb strings.Builder
	for _, c := range strings.ToLower(title) {
		switch {
		case c == ' ':
			sb.WriteByte('-')
		case c == '-' || c == '_' || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'):
			sb.WriteRune(c)
		case c > 127:
			sb.WriteRune(c)
		}
	}
	return sb.String()
}

func renderResult(r *Result) (string, []Plot) {
	var sb strings.Builder
	var plots []Plot
	fmt.Fprintf(&sb, "## %s\n\n", r.Title)
	if r.Description != "" {
		sb.WriteString(r.Description + "\n\n")
	}
	fmt.Fprintf(&sb, "Command: `%s`  \nRun: %s on %s.\n", r.Command, r.Date.UTC().Format("2006-01-02 15:04 UTC"), r.Machine)
	if r.Reduced {
		sb.WriteString("\n> **Reduced size**: this run used BENCH_* overrides; see the configuration below.\n")
	}
	sb.WriteString("\n")
	if len(r.Config) > 0 {
		sb.WriteString("| setting | value |\n|---|---|\n")
		for _, k := range sortedKeys(r.Config) {
			fmt.Fprintf(&sb, "| %s | %s |\n", k, r.Config[k])
		}
		sb.WriteString("\n")
	}
	cols := usedWriteTypes(r.Phases)
	sb.WriteString("| phase | variant | seconds |")
	for _, c := range cols {
		fmt.Fprintf(&sb, " %s writes |", c.col)
	}
	sb.WriteString(" all reads | all writes | deletes | 429s | throttled s | CCM CPU s | CCM peak RSS MiB |\n|---|---|--:|")
	sb.WriteString(strings.Repeat("--:|", len(cols)+7) + "\n")
	for _, p := range r.Phases {
		fmt.Fprintf(&sb, "| %s | %s | %s |", p.Name, p.Variant, num(p.Seconds))
		for _, c := range cols {
			fmt.Fprintf(&sb, " %d |", p.Of(c.typ).Writes)
		}
		cpu, rss := "–", "–"
		if p.CCM != nil {
			cpu, rss = num(p.CCM.CPUSeconds), num(p.CCM.PeakRSSMiB)
		}
		fmt.Fprintf(&sb, " %d | %d | %d | %d | %s | %s | %s |\n", p.ARMTotal.Reads, p.ARMTotal.Writes, p.ARMTotal.Deletes,
			p.Throttled429, num(p.ThrottledSeconds), cpu, rss)
	}
	sb.WriteString("\n")
	if reads := readRows(r.Phases); reads != "" {
		sb.WriteString("<details><summary>ARM requests by resource type (reads / writes / deletes)</summary>\n\n")
		sb.WriteString(reads)
		sb.WriteString("\n</details>\n\n")
	}
	if mins := minimumRows(r.Phases); mins != "" {
		sb.WriteString(mins + "\n")
	}
	if res := resourceRows(r.Phases); res != "" {
		sb.WriteString(res + "\n")
	}
	if hasMetrics(r.Phases) {
		sb.WriteString("| phase | variant | figure | value |\n|---|---|---|--:|\n")
		for _, p := range r.Phases {
			for _, k := range sortedKeys(p.Metrics) {
				fmt.Fprintf(&sb, "| %s | %s | %s | %s |\n", p.Name, p.Variant, k, num(p.Metrics[k]))
			}
		}
		sb.WriteString("\n")
	}
	if len(r.Goals) > 0 {
		sb.WriteString("| goal | want | got | met |\n|---|---|---|---|\n")
		for _, g := range r.Goals {
			met := "yes"
			if !g.Met {
				met = "**no**"
			}
			fmt.Fprintf(&sb, "| %s | %s | %s | %s |\n", g.Name, g.Want, g.Got, met)
		}
		sb.WriteString("\n")
	}
	plots = append(plots, resultPlots(r, cols)...)
	for _, p := range plots {
		fmt.Fprintf(&sb, "![%s](%s)\n\n", p.Title, p.File)
	}
	for _, n := range r.Notes {
		sb.WriteString(n + "\n\n")
	}
	return sb.String(), plots
}

func resultPlots(r *Result, cols []struct{ col, typ string }) []Plot {
	var plots []Plot
	var series []Series
	for _, p := range r.Phases {
		for _, s := range p.Series {
			if s.Name == "" {
				s.Name = p.Name + " (" + p.Variant + ")"
			}
			series = append(series, s)
		}
	}
	if len(series) > 0 {
		plots = append(plots, Plot{File: "plots/" + r.Scenario + "-progress.png", Title: r.Title + ": progress",
			XLabel: "seconds", YLabel: seriesLabel(r), Series: series})
	}
	if len(r.Phases) >= 2 && len(cols) > 0 {
		p := Plot{File: "plots/" + r.Scenario + "-writes.png", Title: r.Title + ": ARM writes per phase", YLabel: "writes"}
		for _, c := range cols {
			p.Bars = append(p.Bars, c.col)
		}
		for _, ph := range r.Phases {
			p.Groups = append(p.Groups, label(ph))
			var vs []float64
			for _, c := range cols {
				vs = append(vs, float64(ph.Of(c.typ).Writes))
			}
			p.Values = append(p.Values, vs)
		}
		plots = append(plots, p)
	}
	for _, ph := range r.Phases {
		if len(ph.Resources) == 0 {
			continue
		}
		// Reads (an order of magnitude more) are in the table only.
		p := Plot{File: "plots/" + r.Scenario + "-resources.png", Title: r.Title + ": ARM writes per resource", YLabel: "requests",
			Bars: []string{"writes", "deletes"}}
		for _, k := range sortedKeys(ph.Resources) {
			c := ph.Resources[k]
			p.Groups = append(p.Groups, k)
			p.Values = append(p.Values, []float64{float64(c.Writes), float64(c.Deletes)})
		}
		plots = append(plots, p)
		break // one plot: the first phase that counted resources
	}
	timed := 0
	for _, ph := range r.Phases {
		if ph.Seconds > 0 {
			timed++
		}
	}
	if timed >= 2 {
		p := Plot{File: "plots/" + r.Scenario + "-time.png", Title: r.Title + ": time to converge", YLabel: "seconds", Bars: []string{"seconds"}}
		for _, ph := range r.Phases {
			if ph.Seconds > 0 {
				p.Groups = append(p.Groups, label(ph))
				p.Values = append(p.Values, []float64{ph.Seconds})
			}
		}
		plots = append(plots, p)
	}
	return plots
}

func seriesLabel(r *Result) string {
	if v, ok := r.Config["progress"]; ok {
		return v
	}
	return "done"
}

func label(p Phase) string {
	if p.Variant == "" {
		return p.Name
	}
	return p.Name + " (" + p.Variant + ")"
}

// usedWriteTypes are the columns with at least one write in some phase.
func usedWriteTypes(ps []Phase) []struct{ col, typ string } {
	var out []struct{ col, typ string }
	for _, c := range writeTypes {
		for _, p := range ps {
			if p.Of(c.typ).Writes > 0 {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

func readRows(ps []Phase) string {
	types := map[string]bool{}
	for _, p := range ps {
		for t := range p.ARM {
			types[t] = true
		}
	}
	if len(types) == 0 {
		return ""
	}
	keys := sortedKeys(types)
	var sb strings.Builder
	sb.WriteString("| resource type |")
	for _, p := range ps {
		fmt.Fprintf(&sb, " %s |", label(p))
	}
	sb.WriteString("\n|---|" + strings.Repeat("--:|", len(ps)) + "\n")
	for _, t := range keys {
		fmt.Fprintf(&sb, "| %s |", ShortType(t))
		for _, p := range ps {
			c := p.ARM[t]
			fmt.Fprintf(&sb, " %d / %d / %d |", c.Reads, c.Writes, c.Deletes)
		}
		sb.WriteString("\n")
	}
	return sb.String()
}

// resourceRows is the table of requests per named resource, one row per phase and resource.
func resourceRows(ps []Phase) string {
	var sb strings.Builder
	for _, p := range ps {
		for _, k := range sortedKeys(p.Resources) {
			c := p.Resources[k]
			fmt.Fprintf(&sb, "| %s | %s | %s | %d | %d | %d |\n", p.Name, p.Variant, k, c.Reads, c.Writes, c.Deletes)
		}
	}
	if sb.Len() == 0 {
		return ""
	}
	return "| phase | variant | resource | reads | writes | deletes |\n|---|---|---|--:|--:|--:|\n" + sb.String()
}

func hasMetrics(ps []Phase) bool {
	return slices.ContainsFunc(ps, func(p Phase) bool { return len(p.Metrics) > 0 })
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// num prints a figure with sensible precision: integers as integers, small values with more
// digits.
func num(v float64) string {
	switch {
	case v == float64(int64(v)):
		return fmt.Sprintf("%d", int64(v))
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// minimumRows compares the requests of phases that computed their minimum, type by type: reads
// and writes made against the fewest that could do the work, and the ratio of the totals.
func minimumRows(ps []Phase) string {
	var sb strings.Builder
	for _, p := range ps {
		if len(p.Minimum) == 0 {
			continue
		}
		var made, least Counts
		for _, t := range sortedKeys(p.Minimum) {
			m, c := p.Minimum[t], p.Of(t)
			made, least = made.Add(c), least.Add(m)
			fmt.Fprintf(&sb, "| %s | %s | %s | %d | %d | %d | %d |\n", p.Name, p.Variant, t, c.Reads, m.Reads, c.Writes, m.Writes)
		}
		fmt.Fprintf(&sb, "| %s | %s | **these types** | %d | %d | %d (%s× the minimum) | %d |\n", p.Name, p.Variant,
			made.Reads, least.Reads, made.Writes, num(float64(made.Writes)/float64(max(least.Writes, 1))), least.Writes)
		if p.MinimumWhy != "" {
			fmt.Fprintf(&sb, "\n%s (%s): %s\n\n", p.Name, p.Variant, p.MinimumWhy)
		}
	}
	if sb.Len() == 0 {
		return ""
	}
	return "| phase | variant | resource type | reads | minimum reads | writes | minimum writes |\n|---|---|---|--:|--:|--:|--:|\n" + sb.String()
}
