package middleware

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

const lbPath = "/subscriptions/s1/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/lb"

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTestMiddleware(opts Options) (*Middleware, *clock, *[]time.Duration, *int) {
	c := &clock{t: time.Unix(1700000000, 0)}
	var slept []time.Duration
	calls := 0
	opts.Now = c.now
	opts.Sleep = func(_ *http.Request, d time.Duration) error { slept = append(slept, d); return nil }
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.WriteHeader(http.StatusOK)
	})
	return New(next, opts), c, &slept, &calls
}

func do(m http.Handler, method, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, httptest.NewRequest(method, path+"?api-version=2024-05-01", nil))
	return rec
}

func TestThrottleBuckets(t *testing.T) {
	m, c, _, calls := newTestMiddleware(Options{Throttle: ThrottleModel{Enabled: true,
		Reads: Bucket{Capacity: 3, RefillPerSecond: 1}, Writes: Bucket{Capacity: 2, RefillPerSecond: 0.5}, Deletes: Bucket{Capacity: 1, RefillPerSecond: 1}}})
	for i, want := range []string{"2", "1", "0"} {
		rec := do(m, "GET", lbPath)
		if rec.Code != 200 || rec.Header().Get("x-ms-ratelimit-remaining-subscription-reads") != want {
			t.Fatalf("read %d: %d remaining=%q", i, rec.Code, rec.Header().Get("x-ms-ratelimit-remaining-subscription-reads"))
		}
	}
	rec := do(m, "GET", lbPath)
	if rec.Code != 429 || rec.Header().Get("Retry-After") != "1" || !strings.Contains(rec.Body.String(), "SubscriptionRequestsThrottled") {
		t.Fatalf("4th read: %d retry-after=%q body=%s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	// Writes have their own bucket; POST actions count as writes.
	if rec := do(m, "PUT", lbPath); rec.Code != 200 || rec.Header().Get("x-ms-ratelimit-remaining-subscription-writes") != "1" {
		t.Fatalf("write: %d %v", rec.Code, rec.Header())
	}
	do(m, "POST", lbPath+"/start")
	if rec := do(m, "PATCH", lbPath); rec.Code != 429 || rec.Header().Get("Retry-After") != "2" {
		t.Fatalf("3rd write: %d retry-after=%q", rec.Code, rec.Header().Get("Retry-After"))
	}
	// Another subscription is not affected.
	if rec := do(m, "GET", strings.Replace(lbPath, "s1", "s2", 1)); rec.Code != 200 {
		t.Fatalf("other subscription: %d", rec.Code)
	}
	c.t = c.t.Add(time.Second)
	if rec := do(m, "GET", lbPath); rec.Code != 200 {
		t.Fatalf("after refill: %d", rec.Code)
	}
	if *calls != 7 {
		t.Errorf("engine saw %d requests, want 7", *calls)
	}
	if s := m.Stats(); s.Throttled != 2 {
		t.Errorf("throttled = %d", s.Throttled)
	}
	// Disabled: never refused, headers report full buckets.
	m.SetThrottle(DefaultThrottle())
	for i := 0; i < 300; i++ {
		if rec := do(m, "GET", lbPath); rec.Code != 200 || rec.Header().Get("x-ms-ratelimit-remaining-subscription-reads") != "250" {
			t.Fatalf("disabled throttle refused or misreported: %d %v", rec.Code, rec.Header())
		}
	}
}

func TestFaultRules(t *testing.T) {
	var lroCalls []string
	m, _, slept, calls := newTestMiddleware(Options{Seed: 42, LRO: func(r *http.Request, d *time.Duration, code, msg string) *http.Request {
		call := "fail:" + code
		if d != nil {
			call = "slow:" + d.String() + "," + call
		}
		lroCalls = append(lroCalls, call)
		return r
	}})
	mustAdd := func(f Fault) Fault {
		t.Helper()
		got, err := m.AddFault(f)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	mustAdd(Fault{Kind: FaultPrecondition, Class: Write, ResourceType: "loadBalancers", Count: 2})
	for i, want := range []int{412, 412, 200} {
		if rec := do(m, "PUT", lbPath); rec.Code != want {
			t.Fatalf("PUT %d: %d, want %d", i, rec.Code, want)
		}
	}
	if rec := do(m, "GET", lbPath); rec.Code != 200 {
		t.Fatalf("read hit a write fault: %d", rec.Code)
	}
	m.ClearFaults()

	mustAdd(Fault{Kind: FaultThrottle, Method: "GET", PathContains: "/LB", RetryAfterSeconds: 3, Count: 1})
	rec := do(m, "GET", lbPath)
	if rec.Code != 429 || rec.Header().Get("Retry-After") != "3" {
		t.Fatalf("throttle fault: %d %v", rec.Code, rec.Header())
	}
	m.ClearFaults()

	mustAdd(Fault{Kind: FaultError, Status: 503, ResourceType: "Microsoft.Network/loadBalancers"})
	rec = do(m, "DELETE", lbPath)
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), "ServiceUnavailable") || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("503 fault: %d %s", rec.Code, rec.Body)
	}
	m.ClearFaults()

	mustAdd(Fault{Kind: FaultConflict, Count: 1})
	if rec := do(m, "PUT", lbPath); rec.Code != 409 || !strings.Contains(rec.Body.String(), "AnotherOperationInProgress") {
		t.Fatalf("conflict fault: %d %s", rec.Code, rec.Body)
	}

	mustAdd(Fault{Kind: FaultLatency, Delay: Duration(2 * time.Second), Class: Read})
	mustAdd(Fault{Kind: FaultLROFailed, Method: "PUT", Count: 1})
	mustAdd(Fault{Kind: FaultSlowLRO, Method: "DELETE", LRODuration: Duration(time.Minute)})
	before := *calls
	do(m, "GET", lbPath)
	do(m, "PUT", lbPath)
	do(m, "DELETE", lbPath)
	if *calls-before != 3 {
		t.Fatalf("pass-through faults blocked requests")
	}
	if len(*slept) != 1 || (*slept)[0] != 2*time.Second {
		t.Errorf("slept %v", *slept)
	}
	// Both LRO rules hit the second PUT: one hook call carries both.
	mustAdd(Fault{Kind: FaultSlowLRO, Method: "PUT", LRODuration: Duration(time.Second)})
	mustAdd(Fault{Kind: FaultLROFailed, Method: "PUT", Code: "Boom"})
	do(m, "PUT", lbPath)
	if strings.Join(lroCalls, ";") != "fail:InternalServerError;slow:1m0s,fail:;slow:1s,fail:Boom" {
		t.Errorf("LRO hook calls = %v", lroCalls)
	}
	for _, f := range m.Faults() {
		if f.Kind == FaultConflict && f.Hits != 1 {
			t.Errorf("conflict hits = %d", f.Hits)
		}
	}
}

func TestFaultRateIsSeeded(t *testing.T) {
	run := func(seed uint64) []int {
		m, _, _, _ := newTestMiddleware(Options{Seed: seed})
		if _, err := m.AddFault(Fault{Kind: FaultError, Rate: 0.3}); err != nil {
			t.Fatal(err)
		}
		var codes []int
		for i := 0; i < 200; i++ {
			codes = append(codes, do(m, "GET", lbPath).Code)
		}
		return codes
	}
	a, b := run(7), run(7)
	failed := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatal("same seed gave different fault sequences")
		}
		if a[i] == 500 {
			failed++
		}
	}
	if failed < 30 || failed > 90 {
		t.Errorf("rate 0.3 failed %d of 200", failed)
	}
}

func TestFaultValidation(t *testing.T) {
	m, _, _, _ := newTestMiddleware(Options{})
	for _, f := range []Fault{
		{Kind: "explode"},
		{Kind: FaultError, Status: 200},
		{Kind: FaultLatency},
		{Kind: FaultThrottle, Rate: 1.5},
		{Kind: FaultThrottle, Class: "list"},
		{Kind: FaultLROFailed}, // no LRO hook configured
	} {
		if _, err := m.AddFault(f); err == nil {
			t.Errorf("AddFault(%+v) accepted", f)
		}
	}
	if _, err := m.AddFault(Fault{ID: "x", Kind: FaultThrottle}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.AddFault(Fault{ID: "x", Kind: FaultThrottle}); err == nil {
		t.Error("duplicate ID accepted")
	}
	if !m.RemoveFault("x") || m.RemoveFault("x") {
		t.Error("RemoveFault")
	}
}

func TestLatencyModelAndCounters(t *testing.T) {
	m, _, slept, _ := newTestMiddleware(Options{Latency: RealisticLatency()})
	do(m, "PUT", lbPath)
	do(m, "PUT", "/subscriptions/s1/resourceGroups/rg/providers/Microsoft.Network/publicIPAddresses/p")
	do(m, "GET", lbPath)
	do(m, "GET", strings.ToLower(lbPath))
	want := []time.Duration{time.Second, 500 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond}
	if len(*slept) != len(want) {
		t.Fatalf("slept %v", *slept)
	}
	for i := range want {
		if (*slept)[i] != want[i] {
			t.Errorf("delay %d = %v, want %v", i, (*slept)[i], want[i])
		}
	}
	s := m.Stats()
	got := map[string]int64{}
	for _, c := range s.Requests {
		got[c.Method+" "+c.ResourceType+" "+http.StatusText(c.Status)] = c.Count
	}
	if got["GET Microsoft.Network/loadBalancers OK"] != 2 || got["PUT Microsoft.Network/loadBalancers OK"] != 1 {
		t.Errorf("counts = %v", got)
	}
	rec := httptest.NewRecorder()
	m.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	if !strings.Contains(string(body), `azsim_arm_requests_total{class="read",method="GET",resource_type="Microsoft.Network/loadBalancers",status="200"} 2`) {
		t.Errorf("metrics:\n%s", body)
	}
	m.ResetStats()
	if len(m.Stats().Requests) != 0 {
		t.Error("ResetStats kept counts")
	}
}

type writerErr struct{}

func (writerErr) Error() string { return "custom" }
func (writerErr) WriteTo(w http.ResponseWriter) {
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write([]byte(`{"error":{"code":"Custom"}}`))
}

func TestAuthorize(t *testing.T) {
	m, _, _, calls := newTestMiddleware(Options{Authorize: func(r *http.Request) error {
		switch r.Header.Get("Authorization") {
		case "ok":
			return nil
		case "custom":
			return writerErr{}
		}
		return errors.New("no token")
	}})
	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, httptest.NewRequest("GET", lbPath, nil))
	if rec.Code != 401 || !strings.Contains(rec.Body.String(), "AuthenticationFailed") {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	req := httptest.NewRequest("GET", lbPath, nil)
	req.Header.Set("Authorization", "custom")
	m.ServeHTTP(rec, req)
	if rec.Code != 401 || !strings.Contains(rec.Body.String(), "Custom") {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	req = httptest.NewRequest("GET", lbPath, nil)
	req.Header.Set("Authorization", "ok")
	m.ServeHTTP(httptest.NewRecorder(), req)
	if *calls != 1 {
		t.Fatalf("engine calls = %d", *calls)
	}
	for _, c := range m.Stats().Requests {
		if c.Status == 401 && c.Count != 2 {
			t.Errorf("401 count = %d", c.Count)
		}
	}
}

func TestStatsHelpers(t *testing.T) {
	s := Stats{Requests: []Count{
		{Method: "PUT", ResourceType: "Microsoft.Network/loadBalancers", Class: Write, Status: 200, Count: 3},
		{Method: "PUT", ResourceType: "Microsoft.Network/loadBalancers", Class: Write, Status: 412, Count: 1},
		{Method: "PATCH", ResourceType: "Microsoft.Network/publicIPAddresses", Class: Write, Status: 200, Count: 2},
		{Method: "GET", ResourceType: "Microsoft.Network/loadBalancers", Class: Read, Status: 200, Count: 5},
		{Method: "DELETE", ResourceType: "Microsoft.Network/publicIPAddresses", Class: Delete, Status: 202, Count: 1},
		{Method: "POST", ResourceType: "Microsoft.Compute/virtualMachineScaleSets", Class: Action, Status: 202, Count: 4},
	}}
	for _, tc := range []struct {
		name      string
		got, want int64
	}{
		{"writes lb", s.Writes("loadBalancers"), 4},
		{"writes all", s.Writes(""), 6},
		{"reads lb", s.Reads("Microsoft.Network/loadBalancers"), 5},
		{"deletes pip", s.Deletes("publicIPAddresses"), 1},
		{"actions", s.Actions(""), 4},
		{"412s", s.Sum("", "", 412), 1},
		{"PUT lb 200", s.Sum("put", "loadbalancers", 200), 3},
		{"total", s.Total(), 16},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %d, want %d", tc.name, tc.got, tc.want)
		}
	}
}
