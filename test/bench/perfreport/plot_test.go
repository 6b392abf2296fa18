package main

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/azure-ccm/azure-ccm/test/bench/report"
)

// Every plot a report asks for is drawn as a PNG; an empty one is refused.
func TestDraw(t *testing.T) {
	r := &report.Result{Scenario: "lb-burst", Title: "Burst of services", Phases: []report.Phase{
		{Name: "burst", Variant: "ours", Seconds: 30, ARM: map[string]report.Counts{"Microsoft.Network/loadBalancers": {Reads: 5, Writes: 12}},
			ARMTotal: report.Counts{Reads: 5, Writes: 12}, Series: []report.Series{{X: []float64{0, 10, 30}, Y: []float64{0, 100, 300}}},
			Resources: map[string]report.Counts{"loadBalancers/kubernetes": {Reads: 50, Writes: 9, Deletes: 1}, "loadBalancers/lb-2": {Reads: 40, Writes: 7}}},
		{Name: "burst", Variant: "baseline", Seconds: 700, ARM: map[string]report.Counts{"Microsoft.Network/loadBalancers": {Reads: 600, Writes: 300}},
			ARMTotal: report.Counts{Reads: 600, Writes: 300}},
	}}
	_, plots := report.Render([]*report.Result{r})
	if len(plots) == 0 {
		t.Fatal("no plots")
	}
	dir := t.TempDir()
	for _, p := range plots {
		if err := Draw(dir, p); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(filepath.Join(dir, p.File))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil || img.Bounds().Dx() < 100 {
			t.Errorf("%s: not a PNG of a plot (%v)", p.File, err)
		}
	}
	if err := Draw(dir, report.Plot{File: "x.png"}); err == nil {
		t.Error("empty plot drawn")
	}
}
