package middleware

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// LROHook changes how the engine runs the long-running operation a request starts: a
// non-nil duration overrides its length, a non-empty failCode makes it end Failed. It returns
// the request to pass on (typically with a context value the engine reads).
type LROHook func(r *http.Request, duration *time.Duration, failCode, failMessage string) *http.Request

// Options configure a Middleware. All are optional.
type Options struct {
	// Authorize checks credentials before anything else; a non-nil error answers 401. An error
	// with a WriteTo(http.ResponseWriter) method writes its own response.
	Authorize func(*http.Request) error
	Latency   LatencyModel
	Throttle  ThrottleModel
	// Seed makes fault rates reproducible (default 1).
	Seed uint64
	// LRO applies lroFailed and slowLRO faults; without it those rules are refused.
	LRO LROHook
	// CanonicalType spells a resource type as the engine registered it (Engine.CanonicalType):
	// counters then show one row per type whatever case clients use. Nil keeps the spelling of
	// the first request, still counting case-insensitively.
	CanonicalType func(string) string
	// Now and Sleep are the clock (tests replace them).
	Now   func() time.Time
	Sleep func(r *http.Request, d time.Duration) error
	// MaxBodyBytes limits request bodies (default DefaultMaxBodyBytes, the engine's limit):
	// larger ones get 413 RequestContentTooLarge, before authentication when the length is
	// announced, so that nobody can make azsim hold a huge body.
	MaxBodyBytes int64
}

// DefaultMaxBodyBytes is the request body limit of the ARM API (the engine's as well).
const DefaultMaxBodyBytes = 4 << 20

// Middleware is the ARM front door around an engine handler.
type Middleware struct {
	next     http.Handler
	opts     Options
	mu       sync.RWMutex
	latency  LatencyModel
	throttle *throttler
	faults   *faultSet
	counters *counters
}

// New wraps next.
func New(next http.Handler, opts Options) *Middleware {
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Sleep == nil {
		opts.Sleep = sleepCtx
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Throttle == (ThrottleModel{}) {
		opts.Throttle = DefaultThrottle()
	}
	return &Middleware{
		next: next, opts: opts, latency: opts.Latency,
		throttle: newThrottler(opts.Throttle), faults: newFaultSet(opts.Seed), counters: newCounters(opts.CanonicalType),
	}
}

func sleepCtx(r *http.Request, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-r.Context().Done():
		return r.Context().Err()
	}
}

// SetLatency replaces the latency model.
func (m *Middleware) SetLatency(l LatencyModel) {
	m.mu.Lock()
	m.latency = l
	m.mu.Unlock()
}

// Latency returns the latency model.
func (m *Middleware) Latency() LatencyModel {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.latency
}

// SetThrottle replaces the throttling model and refills every bucket.
func (m *Middleware) SetThrottle(t ThrottleModel) { m.throttle.set(t) }

// Throttle returns the throttling model.
func (m *Middleware) Throttle() ThrottleModel { return m.throttle.get() }

// AddFault installs a rule and returns it with its ID.
func (m *Middleware) AddFault(f Fault) (Fault, error) {
	if (f.Kind == FaultLROFailed || f.Kind == FaultSlowLRO) && m.opts.LRO == nil {
		return Fault{}, fmt.Errorf("fault kind %s needs the engine's LRO hook", f.Kind)
	}
	return m.faults.add(f)
}

// Faults lists the rules with their hit counts.
func (m *Middleware) Faults() []Fault { return m.faults.list() }

// RemoveFault drops one rule; it reports whether it existed.
func (m *Middleware) RemoveFault(id string) bool { return id != "" && m.faults.remove(id) }

// ClearFaults drops every rule.
func (m *Middleware) ClearFaults() { m.faults.remove("") }

// Stats returns the request counters.
func (m *Middleware) Stats() Stats { return m.counters.snapshot() }

// ResetStats zeroes the JSON counters.
func (m *Middleware) ResetStats() { m.counters.reset() }

// Registry is the Prometheus registry holding azsim's metrics.
func (m *Middleware) Registry() *prometheus.Registry { return m.counters.registry }

// MetricsHandler serves the registry in the Prometheus text format.
func (m *Middleware) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(m.counters.registry, promhttp.HandlerOpts{})
}

// statusWriter remembers the status code written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ServeHTTP runs a request through authentication, throttling, faults and latency, then the
// engine, and counts it.
func (m *Middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := m.opts.Now()
	op := Classify(r)
	sw := &statusWriter{ResponseWriter: w}
	defer func() {
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		m.counters.record(op, r.URL.Path, r.URL.Query().Get("api-version"), status, m.opts.Now().Sub(start))
	}()
	// An announced body over the limit is refused before anything is read or checked.
	if r.ContentLength > m.opts.MaxBodyBytes {
		m.tooLarge(sw)
		return
	}
	// Authentication reads headers only: an unauthenticated body is never read.
	if m.opts.Authorize != nil {
		if err := m.opts.Authorize(r); err != nil {
			var wr interface{ WriteTo(http.ResponseWriter) }
			if errors.As(err, &wr) {
				wr.WriteTo(sw)
			} else {
				writeARMError(sw, http.StatusUnauthorized, "AuthenticationFailed", err.Error())
			}
			return
		}
	}
	// Then receive the whole body, as ARM does before it answers: a handler that sleeps
	// (latency model) or refuses (throttle, fault) with the body unread holds HTTP/2
	// flow-control credit of the client's connection, and enough of those stalled every other
	// large PUT on it.
	if r.Body != nil && r.Body != http.NoBody {
		body, err := io.ReadAll(io.LimitReader(r.Body, m.opts.MaxBodyBytes+1))
		if err != nil {
			_ = r.Body.Close()
			return // the client went away
		}
		if int64(len(body)) > m.opts.MaxBodyBytes {
			_ = r.Body.Close()
			m.tooLarge(sw)
			return
		}
		_ = r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
		m.counters.recordRoleActions(clientOf(r), op.RoleAction(), LinkedActions(op, r.URL.Path, body))
	} else {
		m.counters.recordRoleActions(clientOf(r), op.RoleAction(), nil)
	}
	if op.Subscription != "" {
		remaining, wait, ok := m.throttle.take(op, m.opts.Now())
		sw.Header().Set("x-ms-ratelimit-remaining-subscription-"+pluralBucket(op.Class), strconv.Itoa(remaining))
		if !ok {
			m.counters.addThrottled()
			secs := int(math.Ceil(wait.Seconds()))
			if secs < 1 {
				secs = 1
			}
			sw.Header().Set("Retry-After", strconv.Itoa(secs))
			writeARMError(sw, http.StatusTooManyRequests, "SubscriptionRequestsThrottled", fmt.Sprintf(
				"Number of '%s' requests for subscription '%s' actor 'azsim' exceeded. Please try again after '%d' seconds after additional tokens are available. Refer to https://aka.ms/arm-throttling for additional information.",
				bucketOf(op.Class), op.Subscription, secs))
			return
		}
	}
	delay := m.Latency().DelayFor(op)
	// Pass-through LRO faults are merged so that a slow and a failing rule both apply.
	var lroDur *time.Duration
	var failCode, failMsg string
	for _, f := range m.faults.pick(op, r.URL.Path) {
		m.counters.addFault()
		switch f.Kind {
		case FaultLatency:
			delay += time.Duration(f.Delay)
		case FaultSlowLRO:
			d := time.Duration(f.LRODuration)
			lroDur = &d
		case FaultLROFailed:
			_, failCode, failMsg = f.armError()
		default:
			if err := m.sleep(r, delay); err != nil {
				return
			}
			status, code, msg := f.armError()
			if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable || f.RetryAfterSeconds > 0 {
				ra := f.RetryAfterSeconds
				if ra <= 0 {
					ra = 1
				}
				sw.Header().Set("Retry-After", strconv.Itoa(ra))
			}
			writeARMError(sw, status, code, msg)
			return
		}
	}
	if lroDur != nil || failCode != "" {
		r = m.opts.LRO(r, lroDur, failCode, failMsg)
	}
	if err := m.sleep(r, delay); err != nil {
		return
	}
	m.next.ServeHTTP(sw, r)
}

func (m *Middleware) tooLarge(w http.ResponseWriter) {
	// The rest of the body is not wanted: close the connection rather than drain it.
	w.Header().Set("Connection", "close")
	writeARMError(w, http.StatusRequestEntityTooLarge, "RequestContentTooLarge",
		fmt.Sprintf("The request content size exceeds the maximum of %d bytes.", m.opts.MaxBodyBytes))
}

func (m *Middleware) sleep(r *http.Request, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	return m.opts.Sleep(r, d)
}

func pluralBucket(c Class) string {
	switch bucketOf(c) {
	case Read:
		return "reads"
	case Delete:
		return "deletes"
	default:
		return "writes"
	}
}

func writeARMError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("x-ms-error-code", code)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": message}})
}
