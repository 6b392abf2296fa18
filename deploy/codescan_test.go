package deploy

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

const scanSource = `package sample

import (
	"k8s.io/component-base/metrics"
)

const (
	subsystem = "sample"
	prefix    = "widget_"
	ReasonBad = "BadWidget"
)

var requests = metrics.NewCounterVec(&metrics.CounterOpts{
	Subsystem: subsystem, Name: prefix + "requests_total", Help: "h",
}, []string{"result"})

var latency = metrics.NewHistogram(&metrics.HistogramOpts{Namespace: "ns", Name: "latency_seconds"})

var dynamic = metrics.NewGauge(&metrics.GaugeOpts{Name: computed()})

func computed() string { return "x" }

func record(r recorder, obj any, typ string) {
	r.Event(obj, "Warning", ReasonBad, "message with spaces")
	r.Eventf(obj, typ, "Synced", "done %s", "x")
	r.Event(obj, typ, reasonFromCall(), "unresolvable")
}

type recorder interface {
	Event(obj any, typ, reason, msg string)
	Eventf(obj any, typ, reason, msg string, args ...any)
}

func reasonFromCall() string { return "Nope" }
`

func TestScan(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sample.go"), []byte(scanSource), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "other.go"), []byte("package sample\n\nfunc f() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := Scan([]Package{{ImportPath: "example.com/sample", Dir: dir, GoFiles: []string{"sample.go", "other.go"}}})
	if err != nil {
		t.Fatal(err)
	}
	wantMetrics := []Metric{
		{Name: "ns_latency_seconds", Type: "histogram", Package: "example.com/sample"},
		{Name: "sample_widget_requests_total", Type: "counter", Package: "example.com/sample"},
	}
	if !reflect.DeepEqual(d.Metrics, wantMetrics) {
		t.Errorf("metrics = %+v, want %+v", d.Metrics, wantMetrics)
	}
	// BadWidget is found twice (constant Reason*, recorder call) and reported once.
	wantEvents := []Event{{Reason: "BadWidget", Package: "example.com/sample"}, {Reason: "Synced", Package: "example.com/sample"}}
	if !reflect.DeepEqual(d.Events, wantEvents) {
		t.Errorf("events = %+v, want %+v", d.Events, wantEvents)
	}
}

func TestQueriedMetrics(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`sum by (operation) (rate(azure_ccm_arm_requests_total{job="$job"}[5m]))`, []string{"azure_ccm_arm_requests_total"}},
		{`histogram_quantile(0.99, sum by (le) (rate(a_seconds_bucket{job=~"$job"}[5m]))) / b { }`, []string{"a_seconds_bucket", "b"}},
		{`sum(rate(x[5m]))`, nil},
	} {
		if got := QueriedMetrics(c.expr); !reflect.DeepEqual(got, c.want) {
			t.Errorf("QueriedMetrics(%q) = %v, want %v", c.expr, got, c.want)
		}
	}
}

func TestBaseMetric(t *testing.T) {
	defined := map[string]Metric{
		"lat_seconds": {Name: "lat_seconds", Type: "histogram"},
		"req_total":   {Name: "req_total", Type: "counter"},
	}
	for _, c := range []struct {
		series string
		want   string
		ok     bool
	}{
		{"lat_seconds_bucket", "lat_seconds", true},
		{"lat_seconds_count", "lat_seconds", true},
		{"req_total", "req_total", true},
		{"req_total_count", "", false}, // a counter has no _count series
		{"unknown", "", false},
	} {
		m, ok := BaseMetric(c.series, defined)
		if ok != c.ok || m.Name != c.want {
			t.Errorf("BaseMetric(%q) = %q, %v; want %q, %v", c.series, m.Name, ok, c.want, c.ok)
		}
	}
}
