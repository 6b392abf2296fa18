package middleware

import (
	"math"
	"strings"
	"sync"
	"time"
)

// Bucket is one token bucket: Capacity tokens, refilled at RefillPerSecond.
type Bucket struct {
	Capacity        float64 `json:"capacity"`
	RefillPerSecond float64 `json:"refillPerSecond"`
}

// ThrottleModel is ARM's per-subscription request throttling.
type ThrottleModel struct {
	// Enabled turns refusals (429) on. When off, the remaining-quota headers report full buckets.
	Enabled bool   `json:"enabled"`
	Reads   Bucket `json:"reads"`
	Writes  Bucket `json:"writes"`
	Deletes Bucket `json:"deletes"`
}

// DefaultThrottle is ARM's current token-bucket limit per subscription and principal:
// reads 250 refilled at 25/s, writes and deletes 200 at 10/s. Disabled.
func DefaultThrottle() ThrottleModel {
	return ThrottleModel{
		Reads:   Bucket{Capacity: 250, RefillPerSecond: 25},
		Writes:  Bucket{Capacity: 200, RefillPerSecond: 10},
		Deletes: Bucket{Capacity: 200, RefillPerSecond: 10},
	}
}

func (m ThrottleModel) bucket(c Class) Bucket {
	switch bucketOf(c) {
	case Read:
		return m.Reads
	case Delete:
		return m.Deletes
	default:
		return m.Writes
	}
}

type bucketState struct {
	tokens float64
	at     time.Time
}

// throttler holds the live buckets. It is safe for concurrent use.
type throttler struct {
	mu      sync.Mutex
	model   ThrottleModel
	buckets map[string]*bucketState // subscription|class → state
}

func newThrottler(m ThrottleModel) *throttler {
	return &throttler{model: m, buckets: map[string]*bucketState{}}
}

func (t *throttler) set(m ThrottleModel) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.model = m
	t.buckets = map[string]*bucketState{}
}

func (t *throttler) get() ThrottleModel {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.model
}

// take consumes one token of op's bucket. It returns the tokens left (for the header) and,
// when refused, how long until a token is available.
func (t *throttler) take(op Op, now time.Time) (remaining int, retryAfter time.Duration, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.model.bucket(op.Class)
	if !t.model.Enabled || b.Capacity <= 0 {
		return int(b.Capacity), 0, true
	}
	key := strings.ToLower(op.Subscription) + "|" + string(bucketOf(op.Class))
	st := t.buckets[key]
	if st == nil {
		st = &bucketState{tokens: b.Capacity, at: now}
		t.buckets[key] = st
	}
	st.tokens = math.Min(b.Capacity, st.tokens+now.Sub(st.at).Seconds()*b.RefillPerSecond)
	st.at = now
	if st.tokens < 1 {
		if b.RefillPerSecond <= 0 {
			return 0, time.Hour, false
		}
		wait := time.Duration((1 - st.tokens) / b.RefillPerSecond * float64(time.Second))
		return 0, wait, false
	}
	st.tokens--
	return int(st.tokens), 0, true
}
