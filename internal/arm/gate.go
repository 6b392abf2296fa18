package arm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// Class separates reads from writes: ARM counts (and throttles) them separately.
type Class string

// Request classes.
const (
	ClassRead  Class = "read"
	ClassWrite Class = "write"
)

// ClassDelete is counted apart from other writes: ARM has a bucket for deletes.
const ClassDelete Class = "delete"

// ClassOf returns the throttling class of an HTTP method. ARM counts actions (POST) as writes.
func ClassOf(method string) Class {
	switch method {
	case http.MethodGet, http.MethodHead:
		return ClassRead
	case http.MethodDelete:
		return ClassDelete
	}
	return ClassWrite
}

// ThrottledError is returned, without any request being sent, when a caller's context would
// expire before the gate reopens, and when ARM answered 429.
type ThrottledError struct {
	Class Class
	Scope string
	Until time.Time
	// Cause is the ARM error of the 429 response, when there was one.
	Cause error
}

func (e *ThrottledError) Error() string {
	msg := fmt.Sprintf("ARM %s requests to %s are throttled until %s", e.Class, e.Scope, e.Until.UTC().Format(time.RFC3339))
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

func (e *ThrottledError) Unwrap() error { return e.Cause }

// NonRetriable keeps azcore's retry policy from retrying a request the gate refused.
func (e *ThrottledError) NonRetriable() {}

// IsThrottled reports whether err comes from the throttle gate or is an ARM 429.
func IsThrottled(err error) bool {
	var t *ThrottledError
	if errors.As(err, &t) {
		return true
	}
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusTooManyRequests
}

// GateOptions tunes the gate. Zero values take defaults.
type GateOptions struct {
	// ExhaustedPause closes a class when a provider's own x-ms-ratelimit-remaining-* header (not
	// the subscription's, which the gate paces by) reports 0. Default 5s.
	ExhaustedPause time.Duration
	// DefaultRetryAfter is used for a 429 without a usable Retry-After. Default 10s.
	DefaultRetryAfter time.Duration
	// MaxRetryAfter caps what the server asks for, so one odd header cannot stop the CCM for
	// hours. Default 10m.
	MaxRetryAfter time.Duration
	// Reserve is the number of tokens of a subscription bucket the gate leaves unspent. Default 2.
	Reserve int
	// FillTime is the time an empty bucket is assumed to take to refill until the gate has
	// learnt the rate from the headers. Default 20s (ARM's write bucket: 200 at 10/s).
	FillTime time.Duration
	// Clock is the clock (tests). Default: the real one.
	Clock GateClock
}

// GateClock is the gate's clock.
type GateClock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine, or at least without holding a lock of the clock.
	AfterFunc(d time.Duration, f func()) GateTimer
}

// GateTimer is a timer of a GateClock.
type GateTimer interface{ Stop() bool }

type realClock struct{}

func (realClock) Now() time.Time                                { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) GateTimer { return time.AfterFunc(d, f) }

// Gate is the one throttle gate of the process. ARM throttles by subscription, with separate
// token buckets for reads, writes and deletes; the gate keeps, per subscription and class, an
// estimate of the bucket from the x-ms-ratelimit-remaining-subscription-* headers and lowers it
// for every request it lets go. When the estimate reaches a small reserve, requests wait in
// line and go one at a time as the learnt refill rate brings tokens back, instead of all
// spending the last tokens together. A 429 closes the class for its Retry-After. Classes never
// wait for each other: reads go on while writes are held.
type Gate struct {
	opts    GateOptions
	clock   GateClock
	mu      sync.Mutex
	keys    map[string]*gateKey
	metrics *Metrics
}

type gateKey struct {
	class Class
	scope string
	q     quota
	queue []*gateWaiter
	timer GateTimer
}

type gateWaiter struct {
	ready   chan struct{}
	granted bool
	seq     uint64
}

// NewGate creates a gate; m may be nil.
func NewGate(opts GateOptions, m *Metrics) *Gate {
	if opts.ExhaustedPause <= 0 {
		opts.ExhaustedPause = 5 * time.Second
	}
	if opts.DefaultRetryAfter <= 0 {
		opts.DefaultRetryAfter = 10 * time.Second
	}
	if opts.MaxRetryAfter <= 0 {
		opts.MaxRetryAfter = 10 * time.Minute
	}
	if opts.Reserve <= 0 {
		opts.Reserve = 2
	}
	if opts.FillTime <= 0 {
		opts.FillTime = 20 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = realClock{}
	}
	return &Gate{opts: opts, clock: opts.Clock, keys: map[string]*gateKey{}, metrics: m}
}

func (g *Gate) key(c Class, scope string) *gateKey {
	scope = strings.ToLower(scope)
	id := string(c) + "|" + scope
	k := g.keys[id]
	if k == nil {
		k = &gateKey{class: c, scope: scope, q: quota{opts: quotaOptions{
			Reserve: float64(g.opts.Reserve), FillTime: g.opts.FillTime, MinWindow: 2 * time.Second}}}
		g.keys[id] = k
	}
	return k
}

// ClosedUntil returns when class/scope reopens after a 429 (zero if open).
func (g *Gate) ClosedUntil(c Class, scope string) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	until := g.key(c, scope).q.closed
	if !until.After(g.clock.Now()) {
		return time.Time{}
	}
	return until
}

// Waiting returns the number of requests of class/scope held at the gate.
func (g *Gate) Waiting(c Class, scope string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.key(c, scope).queue)
}

// Close closes class/scope until the given time (it never shortens an existing closure).
func (g *Gate) Close(c Class, scope string, until time.Time) {
	now := g.clock.Now()
	if latest := now.Add(g.opts.MaxRetryAfter); until.After(latest) {
		until = latest
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	k := g.key(c, scope)
	k.q.observe(now, 0, answer{pause: until.Sub(now)})
	g.dispatchLocked(k)
}

// Ticket is a request let go by the gate. Done must be called with its response (nil when the
// request failed without one, or was not sent).
type Ticket struct {
	g   *Gate
	k   *gateKey
	seq uint64
}

// Acquire waits until a request of class c to scope (a subscription) may be sent. If ctx ends
// first, or has a deadline before the request's estimated turn, it returns a ThrottledError at
// once instead of waiting in vain.
func (g *Gate) Acquire(ctx context.Context, c Class, scope string) (*Ticket, error) {
	t, _, err := g.acquire(ctx, c, scope)
	return t, err
}

// acquire is Acquire that also says why the request was held (or refused), if it was.
func (g *Gate) acquire(ctx context.Context, c Class, scope string) (*Ticket, hold, error) {
	g.mu.Lock()
	k := g.key(c, scope)
	now := g.clock.Now()
	if len(k.queue) == 0 {
		if seq, _, ok := k.q.take(now); ok {
			g.mu.Unlock()
			return &Ticket{g: g, k: k, seq: seq}, holdNone, nil
		}
	}
	why := k.q.holdReason(now)
	if dl, ok := ctx.Deadline(); ok {
		if until := now.Add(k.q.eta(now, len(k.queue)+1)); dl.Before(until) {
			g.mu.Unlock()
			return nil, why, &ThrottledError{Class: c, Scope: scope, Until: until}
		}
	}
	w := &gateWaiter{ready: make(chan struct{})}
	k.queue = append(k.queue, w)
	g.metrics.addWaiting(c, 1)
	g.dispatchLocked(k)
	g.mu.Unlock()

	select {
	case <-w.ready:
		g.metrics.observeThrottled(c, g.clock.Now().Sub(now))
		return &Ticket{g: g, k: k, seq: w.seq}, why, nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	if w.granted {
		k.q.cancel(w.seq)
		g.dispatchLocked(k)
	} else {
		for i, x := range k.queue {
			if x == w {
				k.queue = append(k.queue[:i], k.queue[i+1:]...)
				break
			}
		}
		g.metrics.addWaiting(c, -1)
	}
	until := now.Add(k.q.eta(g.clock.Now(), len(k.queue)+1))
	g.mu.Unlock()
	g.metrics.observeThrottled(c, g.clock.Now().Sub(now))
	return nil, why, &ThrottledError{Class: c, Scope: scope, Until: until, Cause: ctx.Err()}
}

// Done updates the gate from the response of the ticket's request.
func (t *Ticket) Done(resp *http.Response) {
	g, k := t.g, t.k
	now := g.clock.Now()
	a := g.answerOf(k.class, resp, now)
	g.mu.Lock()
	k.q.observe(now, t.seq, a)
	g.dispatchLocked(k)
	remaining, rate, limited := k.q.tokens, k.q.refillRate(), k.q.limited
	g.mu.Unlock()
	if limited {
		g.metrics.setQuota(k.class, k.scope, remaining, rate)
	}
}

// answerOf reads what a response says about the quota of class c.
func (g *Gate) answerOf(c Class, resp *http.Response, now time.Time) answer {
	var a answer
	if resp == nil {
		return a
	}
	a.responded = true
	retryAfter, hasRetryAfter := parseRetryAfter(resp.Header, now)
	if resp.StatusCode == http.StatusTooManyRequests {
		if !hasRetryAfter {
			retryAfter = g.opts.DefaultRetryAfter
		}
		a.throttled, a.closedFor = true, min(retryAfter, g.opts.MaxRetryAfter)
		g.metrics.observeThrottleEvent(c, "429")
		return a
	}
	a.remaining, a.hasRemaining = minRemaining(resp.Header, c, true)
	if other, ok := minRemaining(resp.Header, c, false); ok && other <= 0 {
		a.pause = g.opts.ExhaustedPause
		if hasRetryAfter && retryAfter > 0 {
			a.pause = min(retryAfter, g.opts.MaxRetryAfter)
		}
		g.metrics.observeThrottleEvent(c, "quota-exhausted")
	}
	return a
}

// dispatchLocked lets queued requests go while the estimate allows, oldest first, and sets a
// timer for when the next one may go.
func (g *Gate) dispatchLocked(k *gateKey) {
	if k.timer != nil {
		k.timer.Stop()
		k.timer = nil
	}
	for len(k.queue) > 0 {
		seq, wait, ok := k.q.take(g.clock.Now())
		if !ok {
			if wait > 0 {
				// A zero wait means: until an answer comes back (Done dispatches again).
				k.timer = g.clock.AfterFunc(wait, func() {
					g.mu.Lock()
					defer g.mu.Unlock()
					g.dispatchLocked(k)
				})
			}
			return
		}
		w := k.queue[0]
		k.queue = k.queue[1:]
		w.granted, w.seq = true, seq
		close(w.ready)
		g.metrics.addWaiting(k.class, -1)
	}
}

// maxRetryAfter bounds what a header can ask for (the gate applies its own, lower, cap).
const maxRetryAfter = 24 * time.Hour

// parseRetryAfter reads retry-after-ms, x-ms-retry-after-ms or Retry-After (seconds or an
// HTTP date).
func parseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	for _, k := range []string{"retry-after-ms", "x-ms-retry-after-ms"} {
		if v := h.Get(k); v != "" {
			if ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && ms >= 0 {
				return time.Duration(min(ms, maxRetryAfter.Milliseconds())) * time.Millisecond, true
			}
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
		// Bounded before the multiplication: a huge value would overflow into a negative wait.
		return time.Duration(min(s, int64(maxRetryAfter/time.Second))) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return min(d, maxRetryAfter), true
		}
		return 0, true
	}
	return 0, false
}

// minRemaining returns the smallest x-ms-ratelimit-remaining-* value that applies to class c,
// of the subscription's headers (subscription true) or of the others (tenant, resource
// provider). Read quotas only apply to reads, write quotas to writes, delete quotas to deletes;
// the compute form "Microsoft.Compute/HighCostGet3Min;107,..." is read too (it counts for the
// request's class).
func minRemaining(h http.Header, c Class, subscription bool) (float64, bool) {
	found := false
	var lowest int64
	for name, values := range h {
		ln := strings.ToLower(name)
		if !strings.HasPrefix(ln, "x-ms-ratelimit-remaining-") {
			continue
		}
		if strings.HasPrefix(ln, "x-ms-ratelimit-remaining-subscription-") != subscription {
			continue
		}
		var hc Class
		switch {
		case strings.Contains(ln, "read"):
			hc = ClassRead
		case strings.Contains(ln, "delete"):
			hc = ClassDelete
		case strings.Contains(ln, "write"):
			hc = ClassWrite
		}
		if hc != "" && hc != c {
			continue
		}
		for _, v := range values {
			for _, part := range strings.Split(v, ",") {
				if i := strings.LastIndex(part, ";"); i >= 0 {
					part = part[i+1:]
				}
				n, err := strconv.ParseInt(strings.TrimSpace(part), 10, 64)
				if err != nil {
					continue
				}
				if !found || n < lowest {
					lowest, found = n, true
				}
			}
		}
	}
	return float64(lowest), found
}

// gatePolicy is a per-retry azcore policy: every attempt waits at the gate, and every response
// updates it. The 429 itself goes back to the caller as the SDK's ResponseError (IsThrottled
// recognises it); azcore's retry policy is configured not to retry 429s.
type gatePolicy struct {
	gate    *Gate
	metrics *Metrics
}

func (p gatePolicy) Do(req *policy.Request) (*http.Response, error) {
	raw := req.Raw()
	c := ClassOf(raw.Method)
	t, why, err := p.gate.acquire(raw.Context(), c, subscriptionOf(raw.URL.Path))
	p.metrics.observeHold(raw, why)
	if err != nil {
		return nil, err
	}
	resp, err := req.Next()
	t.Done(resp)
	return resp, err
}

// subscriptionOf returns the subscription of an ARM path (the gate's scope: ARM's buckets are
// per subscription); "arm" if none.
func subscriptionOf(path string) string {
	parts := splitPath(path)
	for i := 0; i+1 < len(parts); i++ {
		if strings.EqualFold(parts[i], "subscriptions") {
			return strings.ToLower(parts[i+1])
		}
	}
	return "arm"
}
