package arm

import (
	"context"
	"errors"
	"math"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/component-base/metrics/testutil"

	waitutil "github.com/azure-ccm/azure-ccm/internal/testutil"
)

// fakeClock runs due callbacks synchronously in step, after releasing its lock, so that when
// step returns every timer that fell due has run.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c       *fakeClock
	at      time.Time
	f       func()
	stopped bool
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_000_000, 0)} }

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *fakeClock) AfterFunc(d time.Duration, f func()) GateTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

// next returns the time of the earliest pending timer.
func (c *fakeClock) next() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var at time.Time
	for _, t := range c.timers {
		if !t.stopped && (at.IsZero() || t.at.Before(at)) {
			at = t.at
		}
	}
	return at, !at.IsZero()
}

// advance moves the clock to at and runs the timers due by then, earliest first.
func (c *fakeClock) advance(at time.Time) {
	c.mu.Lock()
	if at.After(c.now) {
		c.now = at
	}
	var due, keep []*fakeTimer
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.at.After(c.now):
			due = append(due, t)
		default:
			keep = append(keep, t)
		}
	}
	c.timers = keep
	c.mu.Unlock()
	sort.Slice(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, t := range due {
		c.mu.Lock()
		stopped := t.stopped
		t.stopped = true
		c.mu.Unlock()
		if !stopped {
			t.f()
		}
	}
}

// bucketServer is ARM's throttling: a token bucket per class that answers 429 with Retry-After
// (whole seconds, rounded up) when empty and reports the remaining tokens (rounded down).
type bucketServer struct {
	mu       sync.Mutex
	capacity float64
	rate     float64
	tokens   float64
	at       time.Time
	ok, t429 int
}

func (s *bucketServer) serve(now time.Time, c Class) *http.Response {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens = math.Min(s.capacity, s.tokens+now.Sub(s.at).Seconds()*s.rate)
	s.at = now
	h := http.Header{}
	name := "x-ms-ratelimit-remaining-subscription-" + map[Class]string{ClassRead: "reads", ClassWrite: "writes", ClassDelete: "deletes"}[c]
	if s.tokens < 1 {
		s.t429++
		h.Set(name, "0")
		h.Set("Retry-After", strconv.Itoa(int(math.Max(1, math.Ceil((1-s.tokens)/s.rate)))))
		return &http.Response{StatusCode: http.StatusTooManyRequests, Header: h}
	}
	s.tokens--
	s.ok++
	h.Set(name, strconv.Itoa(int(s.tokens)))
	return &http.Response{StatusCode: http.StatusOK, Header: h}
}

type burstCase struct {
	name       string
	requests   int
	capacity   float64
	rate       float64
	latency    time.Duration // between the server counting a request and the answer arriving
	startEmpty bool
	// warm is the size of the bucket the gate saw before the burst (an unthrottled phase);
	// the burst then meets the case's smaller bucket after a minute of quiet.
	warm   float64
	max429 int
}

// runBurst sends c.requests concurrent writes through the gate to a bucketServer; a request
// answered 429 goes back to the gate and is sent again (as a requeued reconcile would be). It
// returns the 429s received and the simulated time until every request succeeded.
func runBurst(t *testing.T, c burstCase) (int, time.Duration) {
	t.Helper()
	clk := newFakeClock()
	start := clk.Now()
	srv := &bucketServer{capacity: c.capacity, rate: c.rate, tokens: c.capacity, at: start}
	if c.startEmpty {
		srv.tokens = 0
	}
	g := NewGate(GateOptions{Clock: clk}, NewMetrics())
	if c.warm > 0 {
		before := &bucketServer{capacity: c.warm, rate: c.warm / 10, tokens: c.warm, at: start}
		tk, err := g.Acquire(context.Background(), ClassWrite, "sub")
		if err != nil {
			t.Fatal(err)
		}
		tk.Done(before.serve(clk.Now(), ClassWrite))
		clk.advance(clk.Now().Add(time.Minute))
		start, srv.at = clk.Now(), clk.Now()
	}
	var finished, sleeping atomic.Int32
	var mu sync.Mutex
	var failures []error
	for i := 0; i < c.requests; i++ {
		go func() {
			defer finished.Add(1)
			for {
				tk, err := g.Acquire(context.Background(), ClassWrite, "sub")
				if err != nil {
					mu.Lock()
					failures = append(failures, err)
					mu.Unlock()
					return
				}
				resp := srv.serve(clk.Now(), ClassWrite)
				if c.latency > 0 {
					// Counted as sleeping from after its timer exists until the timer fires (in
					// advance, synchronously): the event loop moves the clock only when every
					// client is counted, so it can neither skip over a timer not yet set nor
					// see a woken client as blocked. (Counting first let a preempted client's
					// answer be delayed by a clock jump, which the gate read as a slower
					// server: 429s under CPU load.)
					ch := make(chan struct{})
					clk.AfterFunc(c.latency, func() { sleeping.Add(-1); close(ch) })
					sleeping.Add(1)
					<-ch
				}
				tk.Done(resp)
				if resp.StatusCode == http.StatusOK {
					return
				}
			}
		}()
	}
	// Event loop: when every client is blocked (held at the gate or waiting for an answer),
	// move the clock to the next timer.
	deadline := time.Now().Add(30 * time.Second)
	for int(finished.Load()) < c.requests {
		if time.Now().After(deadline) {
			t.Fatalf("%s: no progress: %d finished, %d waiting, %d sleeping", c.name, finished.Load(), g.Waiting(ClassWrite, "sub"), sleeping.Load())
		}
		if int(finished.Load())+g.Waiting(ClassWrite, "sub")+int(sleeping.Load()) < c.requests {
			// A client is still running: check again shortly (this loop is the condition wait).
			time.Sleep(20 * time.Microsecond)
			continue
		}
		at, ok := clk.next()
		if !ok {
			t.Fatalf("%s: every client blocked and no timer pending (%d waiting, %d sleeping, %d finished, %+v)", c.name, g.Waiting(ClassWrite, "sub"), sleeping.Load(), finished.Load(), g.key(ClassWrite, "sub").q)
		}
		clk.advance(at)
	}
	if len(failures) > 0 {
		t.Fatalf("%s: %v", c.name, failures[0])
	}
	if srv.ok != c.requests {
		t.Fatalf("%s: %d requests succeeded, want %d", c.name, srv.ok, c.requests)
	}
	t.Logf("learnt rate %v, capacity %v", g.key(ClassWrite, "sub").q.rate, g.key(ClassWrite, "sub").q.capacity)
	return srv.t429, clk.Now().Sub(start)
}

func TestGatePacesBurstToTokenBucket(t *testing.T) {
	cases := []burstCase{
		// The scaled bench: Azure's write bucket / 10.
		{name: "azure÷10, no latency", requests: 200, capacity: 20, rate: 1, max429: 3},
		{name: "azure÷10, 300ms answers", requests: 200, capacity: 20, rate: 1, latency: 300 * time.Millisecond, max429: 3},
		{name: "azure, 1.5s answers", requests: 600, capacity: 200, rate: 10, latency: 1500 * time.Millisecond, max429: 3},
		{name: "azure, empty bucket at start", requests: 300, capacity: 200, rate: 10, startEmpty: true, max429: 3},
		{name: "refill faster than assumed", requests: 300, capacity: 20, rate: 5, max429: 3},
		{name: "refill slower than assumed", requests: 100, capacity: 40, rate: 0.5, max429: 5},
		{name: "fits the bucket", requests: 50, capacity: 200, rate: 10, max429: 0},
		// The scaled bench: the gate saw Azure's full bucket before throttling was switched on.
		{name: "limits lowered after a quiet minute", requests: 200, capacity: 20, rate: 1, warm: 200, latency: 50 * time.Millisecond, max429: 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n429, took := runBurst(t, c)
			// The fastest any client can do: the bucket, then the refill rate.
			ideal := time.Duration(math.Max(0, float64(c.requests)-c.capacity) / c.rate * float64(time.Second))
			if c.startEmpty {
				ideal = time.Duration(float64(c.requests) / c.rate * float64(time.Second))
			}
			t.Logf("%d requests, bucket %v + %v/s: %d 429s, %v (ideal %v)", c.requests, c.capacity, c.rate, n429, took, ideal)
			if n429 > c.max429 {
				t.Errorf("%d 429s, want ≤ %d", n429, c.max429)
			}
			// Pacing must not be much slower than the bucket allows (the refill rate is learnt
			// from noisy samples: a run is now and then up to ~1.7 times the ideal).
			if limit := ideal*2 + 10*time.Second + 2*c.latency; took > limit {
				t.Errorf("took %v, want ≤ %v", took, limit)
			}
		})
	}
}

func TestGateClassesAreSeparate(t *testing.T) {
	clk := newFakeClock()
	g := NewGate(GateOptions{Clock: clk}, nil)
	srv := &bucketServer{capacity: 10, rate: 1, at: clk.Now()} // writes empty
	tk, err := g.Acquire(context.Background(), ClassWrite, "sub")
	if err != nil {
		t.Fatal(err)
	}
	tk.Done(srv.serve(clk.Now(), ClassWrite))
	// Writes are throttled now: a write with a short deadline fails fast...
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if !g.ClosedUntil(ClassWrite, "SUB").After(clk.Now()) {
		t.Fatal("a 429 must close writes")
	}
	short, cancel2 := context.WithDeadline(context.Background(), clk.Now().Add(10*time.Millisecond))
	defer cancel2()
	if _, err := g.Acquire(short, ClassWrite, "sub"); !IsThrottled(err) {
		t.Fatalf("want ThrottledError, got %v", err)
	}
	// ...while reads and deletes, and writes of another subscription, go at once.
	for _, k := range []struct {
		c     Class
		scope string
	}{{ClassRead, "sub"}, {ClassDelete, "sub"}, {ClassWrite, "other"}} {
		tk, err := g.Acquire(ctx, k.c, k.scope)
		if err != nil {
			t.Fatalf("%v/%s held by writes: %v", k.c, k.scope, err)
		}
		tk.Done(nil)
	}
}

func TestGateCancelWhileHeld(t *testing.T) {
	clk := newFakeClock()
	m := NewMetrics()
	g := NewGate(GateOptions{Clock: clk}, m)
	g.Close(ClassWrite, "sub", clk.Now().Add(time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := g.Acquire(ctx, ClassWrite, "sub")
		done <- err
	}()
	waitutil.WaitFor(t, "the request held at the gate", func() bool { return g.Waiting(ClassWrite, "sub") == 1 })
	if v, _ := testutil.GetGaugeMetricValue(m.GateWaiting.WithLabelValues("write")); v != 1 {
		t.Errorf("waiting gauge = %v", v)
	}
	cancel()
	select {
	case err := <-done:
		if !IsThrottled(err) || !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Acquire did not return on cancel")
	}
	if g.Waiting(ClassWrite, "sub") != 0 {
		t.Fatal("cancelled request still queued")
	}
	if v, _ := testutil.GetGaugeMetricValue(m.GateWaiting.WithLabelValues("write")); v != 0 {
		t.Errorf("waiting gauge = %v", v)
	}
}

func TestGateCapsRetryAfter(t *testing.T) {
	clk := newFakeClock()
	g := NewGate(GateOptions{MaxRetryAfter: time.Minute, Clock: clk}, nil)
	tk, err := g.Acquire(context.Background(), ClassWrite, "sub")
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("Retry-After", "100000")
	tk.Done(&http.Response{StatusCode: 429, Header: h})
	if got := g.ClosedUntil(ClassWrite, "sub"); !got.Equal(clk.Now().Add(time.Minute)) {
		t.Fatalf("closed until %v, want now+1m", got)
	}
}

func TestGateProviderQuotaPauses(t *testing.T) {
	cases := []struct {
		name    string
		class   Class
		headers map[string]string
		closed  bool
	}{
		{"compute HighCostGet at 0 closes reads", ClassRead, map[string]string{"x-ms-ratelimit-remaining-resource": "Microsoft.Compute/HighCostGet3Min;0,Microsoft.Compute/HighCostGet30Min;100"}, true},
		{"compute HighCostGet left", ClassRead, map[string]string{"x-ms-ratelimit-remaining-resource": "Microsoft.Compute/HighCostGet3Min;7"}, false},
		{"tenant reads at 0", ClassRead, map[string]string{"x-ms-ratelimit-remaining-tenant-reads": "0"}, true},
		{"tenant writes at 0 do not close reads", ClassRead, map[string]string{"x-ms-ratelimit-remaining-tenant-writes": "0"}, false},
		// The subscription's own bucket is paced, not paused.
		{"subscription reads at 0", ClassRead, map[string]string{"x-ms-ratelimit-remaining-subscription-reads": "0"}, false},
	}
	for _, c := range cases {
		clk := newFakeClock()
		g := NewGate(GateOptions{ExhaustedPause: 7 * time.Second, Clock: clk}, nil)
		tk, err := g.Acquire(context.Background(), c.class, "sub")
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		for k, v := range c.headers {
			h.Set(k, v)
		}
		tk.Done(&http.Response{StatusCode: 200, Header: h})
		got := g.ClosedUntil(c.class, "sub")
		if c.closed != !got.IsZero() || (c.closed && !got.Equal(clk.Now().Add(7*time.Second))) {
			t.Errorf("%s: closed until %v", c.name, got)
		}
	}
}

func TestMinRemaining(t *testing.T) {
	h := http.Header{}
	h.Set("x-ms-ratelimit-remaining-subscription-reads", "249")
	h.Set("x-ms-ratelimit-remaining-subscription-writes", "199")
	h.Set("x-ms-ratelimit-remaining-subscription-deletes", "150")
	h.Set("x-ms-ratelimit-remaining-resource", "Microsoft.Compute/HighCostGet3Min;12")
	cases := []struct {
		class Class
		sub   bool
		want  float64
		ok    bool
	}{
		{ClassRead, true, 249, true},
		{ClassWrite, true, 199, true},
		{ClassDelete, true, 150, true},
		{ClassRead, false, 12, true},
		{ClassWrite, false, 12, true}, // a provider form without a class applies to every class
	}
	for _, c := range cases {
		got, ok := minRemaining(h, c.class, c.sub)
		if got != c.want || ok != c.ok {
			t.Errorf("%v sub=%v: got %v,%v want %v,%v", c.class, c.sub, got, ok, c.want, c.ok)
		}
	}
}

func TestClassAndScope(t *testing.T) {
	for m, want := range map[string]Class{"GET": ClassRead, "HEAD": ClassRead, "PUT": ClassWrite, "PATCH": ClassWrite, "POST": ClassWrite, "DELETE": ClassDelete} {
		if got := ClassOf(m); got != want {
			t.Errorf("ClassOf(%s) = %s", m, got)
		}
	}
	for path, want := range map[string]string{
		"/subscriptions/SUB1/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/lb": "sub1",
		"/subscriptions/sub2/providers/Microsoft.Compute/locations/eastus/operations/x":      "sub2",
		"/providers/Microsoft.Network/operations":                                            "arm",
	} {
		if got := subscriptionOf(path); got != want {
			t.Errorf("subscriptionOf(%s) = %s", path, got)
		}
	}
}
