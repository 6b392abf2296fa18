package deploy

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Metric is a Prometheus metric defined in Go source: the composite literal of a
// component-base or client_golang *Opts with a Name that resolves to a constant string.
type Metric struct {
	Name    string // full name: namespace_subsystem_name
	Type    string // counter, gauge, histogram, summary
	Package string // import path of the defining package
}

// Event is an event reason passed as a constant to an EventRecorder.
type Event struct {
	Reason  string
	Package string
}

// Defs are the metrics and event reasons found in a set of packages.
type Defs struct {
	Metrics []Metric
	Events  []Event
}

// MetricNames returns the set of metric names.
func (d Defs) MetricNames() map[string]Metric {
	out := map[string]Metric{}
	for _, m := range d.Metrics {
		out[m.Name] = m
	}
	return out
}

// Package is a Go package to scan.
type Package struct {
	ImportPath string
	Dir        string
	GoFiles    []string
}

// LinkedPackages lists the non-standard packages linked into the given main packages
// (`go list -deps`), run in the module at dir.
func LinkedPackages(dir string, mains ...string) ([]Package, error) {
	args := append([]string{"list", "-deps", "-f", `{{if not .Standard}}{{.ImportPath}}|{{.Dir}}|{{join .GoFiles ","}}{{end}}`}, mains...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, stderr.String())
	}
	var pkgs []Package
	for _, line := range strings.Split(string(out), "\n") {
		parts := strings.Split(line, "|")
		if len(parts) != 3 || parts[2] == "" {
			continue
		}
		pkgs = append(pkgs, Package{ImportPath: parts[0], Dir: parts[1], GoFiles: strings.Split(parts[2], ",")})
	}
	return pkgs, nil
}

// optsTypes are the metric option types, and the metric type each one defines.
var optsTypes = map[string]string{
	"CounterOpts": "counter", "GaugeOpts": "gauge", "HistogramOpts": "histogram",
	"SummaryOpts": "summary", "TimingHistogramOpts": "histogram",
}

// recorderMethods are the EventRecorder methods; the reason is the first constant argument
// after the object that looks like a reason (CamelCase, not an event type).
var recorderMethods = map[string]bool{"Event": true, "Eventf": true, "AnnotatedEventf": true}

var reasonPattern = regexp.MustCompile(`^[A-Z][A-Za-z]+$`)

// Scan parses the packages that mention metric options or event recorders and collects the
// metrics and event reasons whose names are constant in the package.
func Scan(pkgs []Package) (Defs, error) {
	var d Defs
	for _, p := range pkgs {
		files, err := parsePackage(p)
		if err != nil {
			return Defs{}, err
		}
		if files == nil {
			continue
		}
		consts := stringConsts(files)
		// Reasons passed through a helper (p.event(obj, typ, ReasonX, ...)) are not constant
		// at the recorder call: the package's Reason* constants name them.
		for name, v := range consts {
			if strings.HasPrefix(name, "Reason") && reasonPattern.MatchString(v) {
				d.Events = append(d.Events, Event{Reason: v, Package: p.ImportPath})
			}
		}
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.CompositeLit:
					if m, ok := metricOf(x, consts); ok {
						m.Package = p.ImportPath
						d.Metrics = append(d.Metrics, m)
					}
				case *ast.CallExpr:
					if r, ok := reasonOf(x, consts); ok {
						d.Events = append(d.Events, Event{Reason: r, Package: p.ImportPath})
					}
				}
				return true
			})
		}
	}
	sort.Slice(d.Metrics, func(i, j int) bool { return d.Metrics[i].Name < d.Metrics[j].Name })
	sort.Slice(d.Events, func(i, j int) bool { return d.Events[i].Reason < d.Events[j].Reason })
	d.Events = uniqueEvents(d.Events)
	return d, nil
}

// parsePackage parses the package's files, or returns nil if none can define a metric or
// record an event (most packages: skipped cheaply).
func parsePackage(p Package) ([]*ast.File, error) {
	srcs := map[string][]byte{}
	relevant := false
	for _, name := range p.GoFiles {
		b, err := os.ReadFile(filepath.Join(p.Dir, name))
		if err != nil {
			return nil, err
		}
		srcs[name] = b
		if bytes.Contains(b, []byte("Opts{")) || bytes.Contains(b, []byte(".Event")) {
			relevant = true
		}
	}
	if !relevant {
		return nil, nil
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for name, b := range srcs {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), b, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// stringConsts resolves the package-level string constants (literals and concatenations of
// literals and other constants of the package).
func stringConsts(files []*ast.File) map[string]string {
	exprs := map[string]ast.Expr{}
	for _, f := range files {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						exprs[n.Name] = vs.Values[i]
					}
				}
			}
		}
	}
	out := map[string]string{}
	// Resolve in rounds: a constant may be defined from another.
	for changed := true; changed; {
		changed = false
		for name, e := range exprs {
			if _, done := out[name]; done {
				continue
			}
			if v, ok := evalString(e, out); ok {
				out[name] = v
				changed = true
			}
		}
	}
	return out
}

func evalString(e ast.Expr, consts map[string]string) (string, bool) {
	switch x := e.(type) {
	case *ast.BasicLit:
		if x.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(x.Value)
		return s, err == nil
	case *ast.Ident:
		v, ok := consts[x.Name]
		return v, ok
	case *ast.ParenExpr:
		return evalString(x.X, consts)
	case *ast.BinaryExpr:
		if x.Op != token.ADD {
			return "", false
		}
		a, ok1 := evalString(x.X, consts)
		b, ok2 := evalString(x.Y, consts)
		return a + b, ok1 && ok2
	}
	return "", false
}

func metricOf(lit *ast.CompositeLit, consts map[string]string) (Metric, bool) {
	var typeName string
	switch t := lit.Type.(type) {
	case *ast.SelectorExpr:
		typeName = t.Sel.Name
	case *ast.Ident:
		typeName = t.Name
	}
	kind, ok := optsTypes[typeName]
	if !ok {
		return Metric{}, false
	}
	fields := map[string]string{}
	for _, el := range lit.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		key, ok := kv.Key.(*ast.Ident)
		if !ok {
			continue
		}
		if v, ok := evalString(kv.Value, consts); ok {
			fields[key.Name] = v
		}
	}
	if fields["Name"] == "" {
		return Metric{}, false
	}
	var parts []string
	for _, k := range []string{"Namespace", "Subsystem", "Name"} {
		if fields[k] != "" {
			parts = append(parts, fields[k])
		}
	}
	return Metric{Name: strings.Join(parts, "_"), Type: kind}, true
}

func reasonOf(call *ast.CallExpr, consts map[string]string) (string, bool) {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || !recorderMethods[sel.Sel.Name] || len(call.Args) < 3 {
		return "", false
	}
	for _, a := range call.Args[1:min(4, len(call.Args))] {
		if v, ok := evalString(a, consts); ok && reasonPattern.MatchString(v) && v != "Normal" && v != "Warning" {
			return v, true
		}
	}
	return "", false
}

// promSelector matches a metric name used as a PromQL vector selector: name{...}.
var promSelector = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{`)

// QueriedMetrics returns the metric names a PromQL expression selects. Selectors must carry
// braces (the dashboard's always filter on $job), so that label names and functions are not
// mistaken for metrics.
func QueriedMetrics(expr string) []string {
	var out []string
	for _, m := range promSelector.FindAllStringSubmatch(expr, -1) {
		out = append(out, m[1])
	}
	return out
}

// BaseMetric maps a series name to the metric that exposes it: histogram and summary
// series (_bucket, _sum, _count) to their metric.
func BaseMetric(series string, defined map[string]Metric) (Metric, bool) {
	if m, ok := defined[series]; ok {
		return m, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(series, suffix); ok {
			if m, ok := defined[base]; ok && (m.Type == "histogram" || m.Type == "summary") {
				return m, true
			}
		}
	}
	return Metric{}, false
}

// uniqueEvents drops repeats of a (reason, package) pair from a sorted list.
func uniqueEvents(in []Event) []Event {
	var out []Event
	seen := map[Event]bool{}
	for _, e := range in {
		if !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	return out
}
