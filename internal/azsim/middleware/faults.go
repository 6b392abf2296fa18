package middleware

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
)

// FaultKind is what a fault rule does to a matching request.
type FaultKind string

// Fault kinds.
const (
	// FaultThrottle answers 429 with Retry-After (RetryAfterSeconds, default 1).
	FaultThrottle FaultKind = "throttle"
	// FaultPrecondition answers 412 PreconditionFailed, as for a stale If-Match.
	FaultPrecondition FaultKind = "precondition"
	// FaultConflict answers 409 AnotherOperationInProgress.
	FaultConflict FaultKind = "conflict"
	// FaultError answers Status (default 500) with Code/Message.
	FaultError FaultKind = "error"
	// FaultLROFailed lets the request through but makes its long-running operation end Failed.
	FaultLROFailed FaultKind = "lroFailed"
	// FaultSlowLRO lets the request through with its operation lasting LRODuration.
	FaultSlowLRO FaultKind = "slowLRO"
	// FaultLatency delays the request by Delay and lets it through.
	FaultLatency FaultKind = "latency"
)

// Fault is one injection rule. Empty selectors match anything.
type Fault struct {
	ID   string    `json:"id,omitempty"`
	Kind FaultKind `json:"kind"`

	Class        Class  `json:"class,omitempty"`
	ResourceType string `json:"resourceType,omitempty"`
	Method       string `json:"method,omitempty"`
	// PathContains selects requests whose path contains this text (case-insensitive), e.g. a
	// resource name.
	PathContains string `json:"pathContains,omitempty"`

	// Rate is the probability (0..1] that a matching request is hit; 0 means always.
	Rate float64 `json:"rate,omitempty"`
	// Count is how many requests the rule hits before it retires; 0 means no limit.
	Count int `json:"count,omitempty"`

	Status            int      `json:"status,omitempty"`
	Code              string   `json:"code,omitempty"`
	Message           string   `json:"message,omitempty"`
	RetryAfterSeconds int      `json:"retryAfterSeconds,omitempty"`
	Delay             Duration `json:"delay,omitempty"`
	LRODuration       Duration `json:"lroDuration,omitempty"`

	// Hits is how many requests the rule has hit (read-only).
	Hits int `json:"hits"`
}

// Validate rejects rules that cannot work.
func (f Fault) Validate() error {
	switch f.Kind {
	case FaultThrottle, FaultPrecondition, FaultConflict, FaultLROFailed:
	case FaultError:
		if f.Status != 0 && (f.Status < 400 || f.Status > 599) {
			return fmt.Errorf("fault %q: status %d is not an error status", f.ID, f.Status)
		}
	case FaultLatency:
		if f.Delay <= 0 {
			return fmt.Errorf("fault %q: latency needs a positive delay", f.ID)
		}
	case FaultSlowLRO:
		if f.LRODuration <= 0 {
			return fmt.Errorf("fault %q: slowLRO needs a positive lroDuration", f.ID)
		}
	default:
		return fmt.Errorf("fault %q: unknown kind %q (throttle, precondition, conflict, error, lroFailed, slowLRO, latency)", f.ID, f.Kind)
	}
	if f.Rate < 0 || f.Rate > 1 {
		return fmt.Errorf("fault %q: rate %v is outside 0..1", f.ID, f.Rate)
	}
	if f.Count < 0 {
		return fmt.Errorf("fault %q: negative count", f.ID)
	}
	if f.Class != "" && f.Class != Read && f.Class != Write && f.Class != Delete && f.Class != Action {
		return fmt.Errorf("fault %q: unknown class %q", f.ID, f.Class)
	}
	return nil
}

func (f *Fault) matches(op Op, path string) bool {
	return (f.Class == "" || f.Class == op.Class) &&
		(f.Method == "" || strings.EqualFold(f.Method, op.Method)) &&
		typeMatches(f.ResourceType, op.ResourceType) &&
		(f.PathContains == "" || strings.Contains(strings.ToLower(path), strings.ToLower(f.PathContains)))
}

// armError is the status and ARM error a terminating fault answers with.
func (f *Fault) armError() (status int, code, message string) {
	status, code, message = f.Status, f.Code, f.Message
	def := func(s int, c, m string) {
		if status == 0 {
			status = s
		}
		if code == "" {
			code = c
		}
		if message == "" {
			message = m
		}
	}
	switch f.Kind {
	case FaultThrottle:
		def(http.StatusTooManyRequests, "SubscriptionRequestsThrottled", "Number of requests for subscription exceeded the limit (azsim fault). Please try again later.")
	case FaultPrecondition:
		def(http.StatusPreconditionFailed, "PreconditionFailed", "Precondition failed: the etag in If-Match does not match the resource (azsim fault).")
	case FaultConflict:
		def(http.StatusConflict, "AnotherOperationInProgress", "Another operation on this or dependent resource is in progress. Retry the request after it completes (azsim fault).")
	case FaultError:
		switch status {
		case 0, http.StatusInternalServerError:
			def(http.StatusInternalServerError, "InternalServerError", "An error has occurred in the service (azsim fault).")
		case http.StatusServiceUnavailable:
			def(status, "ServiceUnavailable", "The service is temporarily unavailable (azsim fault).")
		default:
			def(status, http.StatusText(status), "Injected error (azsim fault).")
		}
	case FaultLROFailed:
		def(0, "InternalServerError", "The operation failed (azsim fault).")
	}
	return status, code, message
}

// faultSet is the live rule list with its seeded random source.
type faultSet struct {
	mu    sync.Mutex
	rules []*Fault
	rng   *rand.Rand
	seq   int
}

func newFaultSet(seed uint64) *faultSet {
	// Seeded on purpose: a chaos run's faults replay from its seed.
	return &faultSet{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))} //nolint:gosec // G404: replayable, not secret
}

func (s *faultSet) add(f Fault) (Fault, error) {
	if err := f.Validate(); err != nil {
		return Fault{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	if f.ID == "" {
		f.ID = fmt.Sprintf("f%d", s.seq)
	}
	for _, r := range s.rules {
		if r.ID == f.ID {
			return Fault{}, fmt.Errorf("fault %q already exists", f.ID)
		}
	}
	f.Hits = 0
	s.rules = append(s.rules, &f)
	return f, nil
}

func (s *faultSet) list() []Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Fault, 0, len(s.rules))
	for _, r := range s.rules {
		out = append(out, *r)
	}
	return out
}

// remove drops the rule with id, or all rules when id is "".
func (s *faultSet) remove(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == "" {
		s.rules = nil
		return true
	}
	for i, r := range s.rules {
		if r.ID == id {
			s.rules = append(s.rules[:i], s.rules[i+1:]...)
			return true
		}
	}
	return false
}

// pick returns the rules that hit this request, in order: any number of pass-through rules
// (latency, slowLRO, lroFailed) and at most one terminating rule, which ends the list.
func (s *faultSet) pick(op Op, path string) []Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	var hit []Fault
	for _, r := range s.rules {
		if (r.Count > 0 && r.Hits >= r.Count) || !r.matches(op, path) {
			continue
		}
		if r.Rate > 0 && r.Rate < 1 && s.rng.Float64() >= r.Rate {
			continue
		}
		r.Hits++
		hit = append(hit, *r)
		if r.terminates() {
			break
		}
	}
	return hit
}

func (f *Fault) terminates() bool {
	switch f.Kind {
	case FaultLatency, FaultSlowLRO, FaultLROFailed:
		return false
	}
	return true
}
