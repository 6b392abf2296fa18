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

// ClassOf returns the throttling class of an HTTP method.
func ClassOf(method string) Class {
	if method == http.MethodGet || method == http.MethodHead {
		return ClassRead
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
	// ExhaustedPause closes a class when an x-ms-ratelimit-remaining-* header reports 0 and no
	// Retry-After says for how long (ARM's token buckets refill within seconds). Default 5s.
	ExhaustedPause time.Duration
	// DefaultRetryAfter is used for a 429 without a usable Retry-After. Default 10s.
	DefaultRetryAfter time.Duration
	// MaxRetryAfter caps what the server asks for, so one odd header cannot stop the CCM for
	// hours. Default 10m.
	MaxRetryAfter time.Duration
	// Now is the clock (tests).
	Now func() time.Time
}

// Gate is the one throttle gate of the process. It is keyed by class (read/write) and by the
// resource provider namespace (Microsoft.Network, Microsoft.Compute, ...), because ARM and the
// resource providers throttle reads and writes, and each provider, separately. While a key is
// closed nothing of that key is sent: callers wait, or fail fast when their context ends first.
type Gate struct {
	opts    GateOptions
	mu      sync.Mutex
	closed  map[string]time.Time
	metrics *Metrics
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
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Gate{opts: opts, closed: map[string]time.Time{}, metrics: m}
}

func gateKey(c Class, scope string) string { return string(c) + "|" + strings.ToLower(scope) }

// ClosedUntil returns when the class/scope reopens (zero if open).
func (g *Gate) ClosedUntil(c Class, scope string) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	until := g.closed[gateKey(c, scope)]
	if !until.After(g.opts.Now()) {
		return time.Time{}
	}
	return until
}

// Close closes class/scope until the given time (it never shortens an existing closure).
func (g *Gate) Close(c Class, scope string, until time.Time) {
	if max := g.opts.Now().Add(g.opts.MaxRetryAfter); until.After(max) {
		until = max
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	k := gateKey(c, scope)
	if until.After(g.closed[k]) {
		g.closed[k] = until
	}
}

// Wait blocks until class/scope is open. If ctx has a deadline before the reopening, it
// returns a ThrottledError at once instead of waiting in vain.
func (g *Gate) Wait(ctx context.Context, c Class, scope string) error {
	for {
		until := g.ClosedUntil(c, scope)
		if until.IsZero() {
			return nil
		}
		if dl, ok := ctx.Deadline(); ok && dl.Before(until) {
			return &ThrottledError{Class: c, Scope: scope, Until: until}
		}
		start := g.opts.Now()
		wait := until.Sub(start)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			g.metrics.observeThrottled(c, g.opts.Now().Sub(start))
			return &ThrottledError{Class: c, Scope: scope, Until: until, Cause: ctx.Err()}
		case <-t.C:
			g.metrics.observeThrottled(c, g.opts.Now().Sub(start))
		}
	}
}

// Observe updates the gate from a response: a 429 closes the class for Retry-After; a
// remaining-quota header at 0 closes it for ExhaustedPause (or Retry-After when given).
func (g *Gate) Observe(c Class, scope string, resp *http.Response) {
	if resp == nil {
		return
	}
	now := g.opts.Now()
	retryAfter, hasRetryAfter := parseRetryAfter(resp.Header, now)
	if resp.StatusCode == http.StatusTooManyRequests {
		if !hasRetryAfter {
			retryAfter = g.opts.DefaultRetryAfter
		}
		g.Close(c, scope, now.Add(retryAfter))
		g.metrics.observeThrottleEvent(c, "429")
		return
	}
	if remaining, ok := minRemaining(resp.Header, c); ok && remaining <= 0 {
		pause := g.opts.ExhaustedPause
		if hasRetryAfter && retryAfter > 0 {
			pause = retryAfter
		}
		g.Close(c, scope, now.Add(pause))
		g.metrics.observeThrottleEvent(c, "quota-exhausted")
	}
}

// parseRetryAfter reads retry-after-ms, x-ms-retry-after-ms or Retry-After (seconds or an
// HTTP date).
func parseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	for _, k := range []string{"retry-after-ms", "x-ms-retry-after-ms"} {
		if v := h.Get(k); v != "" {
			if ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && ms >= 0 {
				return time.Duration(ms) * time.Millisecond, true
			}
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d, true
		}
		return 0, true
	}
	return 0, false
}

// minRemaining returns the smallest x-ms-ratelimit-remaining-* value that applies to class c.
// Read quotas only gate reads, write/delete quotas only writes; the compute form
// "Microsoft.Compute/HighCostGet3Min;107,..." is read too (it counts for the request's class).
func minRemaining(h http.Header, c Class) (int64, bool) {
	found := false
	var min int64
	for name, values := range h {
		ln := strings.ToLower(name)
		if !strings.HasPrefix(ln, "x-ms-ratelimit-remaining-") {
			continue
		}
		isRead := strings.Contains(ln, "read")
		isWrite := strings.Contains(ln, "write") || strings.Contains(ln, "delete")
		if (isRead && c != ClassRead) || (isWrite && c != ClassWrite) {
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
				if !found || n < min {
					min, found = n, true
				}
			}
		}
	}
	return min, found
}

// gatePolicy is a per-retry azcore policy: every attempt waits at the gate, and every response
// updates it. The 429 itself goes back to the caller as the SDK's ResponseError (IsThrottled
// recognises it); azcore's retry policy is configured not to retry 429s.
type gatePolicy struct{ gate *Gate }

func (p gatePolicy) Do(req *policy.Request) (*http.Response, error) {
	raw := req.Raw()
	c := ClassOf(raw.Method)
	scope := providerNamespace(raw.URL.Path)
	if err := p.gate.Wait(raw.Context(), c, scope); err != nil {
		return nil, err
	}
	resp, err := req.Next()
	if err != nil {
		return resp, err
	}
	p.gate.Observe(c, scope, resp)
	return resp, nil
}
