package deploy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/azure-ccm/azure-ccm/test/framework"
)

// binaries are the main packages whose linked code defines what operators can observe.
var binaries = []string{"./cmd/azure-cloud-controller-manager", "./cmd/azure-cloud-node-manager", "./cmd/azure-disk-provisioner"}

var (
	scanOnce sync.Once
	scanned  Defs
	scanErr  error
)

// codeDefs scans the packages linked into the binaries once per test run.
func codeDefs(t *testing.T) Defs {
	t.Helper()
	scanOnce.Do(func() {
		var pkgs []Package
		if pkgs, scanErr = LinkedPackages(framework.RepoRoot(), binaries...); scanErr == nil {
			scanned, scanErr = Scan(pkgs)
		}
	})
	if scanErr != nil {
		t.Fatal(scanErr)
	}
	return scanned
}

// dashboardQueries returns every PromQL expression of a Grafana dashboard: panel targets
// (rows included) and query variables.
func dashboardQueries(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Type       string          `json:"type"`
				Definition string          `json:"definition"`
				Query      json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s is not valid JSON: %v", path, err)
	}
	var exprs []string
	var walk func([]json.RawMessage)
	walk = func(panels []json.RawMessage) {
		for _, raw := range panels {
			var p struct {
				Title   string            `json:"title"`
				Panels  []json.RawMessage `json:"panels"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			}
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatal(err)
			}
			for _, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("panel %q has a target without expr", p.Title)
				}
				exprs = append(exprs, tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			exprs = append(exprs, v.Definition)
		}
	}
	return exprs
}

// labelValuesMetric finds the metric of label_values(metric, label) in a variable query.
var labelValuesMetric = regexp.MustCompile(`label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,`)

// TestDashboardQueriesDefinedMetrics: the dashboard parses, and every metric it queries is
// defined by the code linked into the binaries (a renamed metric breaks this test, not the
// operator's dashboard).
func TestDashboardQueriesDefinedMetrics(t *testing.T) {
	defined := codeDefs(t).MetricNames()
	files, _ := filepath.Glob(filepath.Join(framework.RepoRoot(), "deploy", "grafana", "*.json"))
	if len(files) == 0 {
		t.Fatal("no dashboard in deploy/grafana")
	}
	for _, f := range files {
		exprs := dashboardQueries(t, f)
		if len(exprs) == 0 {
			t.Errorf("%s: no queries", f)
		}
		used := map[string]bool{}
		for _, e := range exprs {
			names := QueriedMetrics(e)
			if m := labelValuesMetric.FindStringSubmatch(e); m != nil {
				names = append(names, m[1])
			}
			if len(names) == 0 {
				t.Errorf("%s: query selects no metric with braces: %s", filepath.Base(f), e)
			}
			for _, n := range names {
				m, ok := BaseMetric(n, defined)
				if !ok {
					t.Errorf("%s: %s is not defined by the code (query %s)", filepath.Base(f), n, e)
					continue
				}
				used[m.Name] = true
			}
		}
		// Every metric of the project's code is on the dashboard.
		for name, m := range defined {
			if strings.HasPrefix(m.Package, "github.com/azure-ccm/azure-ccm/") && !used[name] {
				t.Errorf("%s: metric %s (%s) is not on the dashboard", filepath.Base(f), name, m.Package)
			}
		}
	}
}

// documented reports whether the operations guide names the metric or reason as code.
func documented(doc, name string) bool { return strings.Contains(doc, "`"+name+"`") }

// TestOperationsDocCoversCode: docs/operations.md names every metric and event reason of the
// project's code and of the cloud-provider controllers it runs, and the leader-election event.
func TestOperationsDocCoversCode(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	ours := func(pkg string) bool {
		return strings.HasPrefix(pkg, "github.com/azure-ccm/azure-ccm/") ||
			strings.HasPrefix(pkg, "k8s.io/cloud-provider/controllers/") ||
			pkg == "k8s.io/client-go/tools/leaderelection/resourcelock"
	}
	d := codeDefs(t)
	n := 0
	for _, m := range d.Metrics {
		if ours(m.Package) {
			n++
			if !documented(doc, m.Name) {
				t.Errorf("docs/operations.md does not document metric `%s` (%s)", m.Name, m.Package)
			}
		}
	}
	for _, e := range d.Events {
		if ours(e.Package) {
			n++
			if !documented(doc, e.Reason) {
				t.Errorf("docs/operations.md does not document event reason `%s` (%s)", e.Reason, e.Package)
			}
		}
	}
	if n < 10 {
		t.Errorf("only %d metrics and reasons found in the code: the scan is broken", n)
	}
}
