package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/azure-ccm/azure-ccm/test/bench/report"
)

// Draw renders p as a PNG under dir (p.File is relative to dir).
func Draw(dir string, p report.Plot) error {
	plt := plot.New()
	plt.Title.Text = p.Title
	plt.X.Label.Text = p.XLabel
	plt.Y.Label.Text = p.YLabel
	plt.Legend.Top = true
	switch {
	case len(p.Series) > 0:
		if err := drawLines(plt, p.Series); err != nil {
			return fmt.Errorf("%s: %w", p.File, err)
		}
	case len(p.Groups) > 0:
		if err := drawBars(plt, p); err != nil {
			return fmt.Errorf("%s: %w", p.File, err)
		}
	default:
		return fmt.Errorf("%s: nothing to draw", p.File)
	}
	path := filepath.Join(dir, p.File)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	width := 16 * vg.Centimeter
	if n := len(p.Groups) * max(1, len(p.Bars)); n > 8 {
		width = vg.Length(n) * 2 * vg.Centimeter
	}
	return plt.Save(width, 9*vg.Centimeter, path)
}

func drawLines(plt *plot.Plot, series []report.Series) error {
	for i, s := range series {
		if len(s.X) != len(s.Y) {
			return fmt.Errorf("series %q: %d x and %d y", s.Name, len(s.X), len(s.Y))
		}
		pts := make(plotter.XYs, len(s.X))
		for j := range s.X {
			pts[j].X, pts[j].Y = s.X[j], s.Y[j]
		}
		if !slices.IsSorted(s.X) {
			// Samples in the order they were measured (e.g. one lag per change), not a curve
			// over time: dots.
			sc, err := plotter.NewScatter(pts)
			if err != nil {
				return err
			}
			sc.Color = plotutil.Color(i)
			sc.Radius = vg.Points(2)
			plt.Add(sc)
			plt.Legend.Add(s.Name, sc)
			continue
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i)
		l.Width = vg.Points(1.5)
		plt.Add(l)
		plt.Legend.Add(s.Name, l)
	}
	plt.Add(plotter.NewGrid())
	return nil
}

// drawBars draws one bar per (group, bar name), the bars of a group side by side.
func drawBars(plt *plot.Plot, p report.Plot) error {
	nb := max(1, len(p.Bars))
	w := vg.Points(float64(min(40, 160/nb)))
	for j := 0; j < nb; j++ {
		vals := make(plotter.Values, len(p.Groups))
		for i := range p.Groups {
			if j < len(p.Values[i]) {
				vals[i] = p.Values[i][j]
			}
		}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return err
		}
		b.Color = plotutil.Color(j)
		b.LineStyle.Width = 0
		b.Offset = vg.Length(float64(j)-float64(nb-1)/2) * w
		plt.Add(b)
		if len(p.Bars) > 1 {
			plt.Legend.Add(p.Bars[j], b)
		}
	}
	plt.NominalX(p.Groups...)
	plt.Add(plotter.NewGrid())
	return nil
}
