package arm

import (
	"math"
	"time"
)

// quota is the gate's estimate of one ARM token bucket (one subscription and class), learnt from
// the x-ms-ratelimit-remaining-subscription-* headers. It is pure: every method takes the time.
//
// ARM refills each bucket continuously; a request is refused (429) only when the bucket is empty.
// The estimate is decremented for every request sent, so concurrent callers cannot all spend the
// last tokens at once, and corrected by every answer. Below a small reserve, requests are held and
// let go one at a time as the learnt refill rate brings tokens back.
type quota struct {
	opts quotaOptions

	known    bool // an answer with or without a header has been seen
	limited  bool // the answers carry a remaining-quota header
	tokens   float64
	at       time.Time
	capacity float64                // highest remaining seen + 1: a lower bound of the bucket's size
	rate     float64                // learnt refill per second; 0 until learnt
	inflight int                    // sent, not answered
	seq      uint64                 // requests let go so far: the sequence number of the last one
	answered uint64                 // requests answered (or cancelled) so far
	sent     map[uint64]quotaFlight // in flight, by sequence number
	closed   time.Time
	// throttledUntil is the end of the latest closure ARM asked for with a 429 (closed may last
	// longer, for a pause of the gate's own).
	throttledUntil time.Time

	// Refill rate sampling over a window in which the bucket stayed low (no clipping at capacity).
	counted    int64 // answers that consumed a token
	lastAnswer time.Time
	anchor     *quotaSample
	lastSample time.Time
}

// quotaFlight is a request in flight: when it was let go, and how many requests had been answered.
type quotaFlight struct {
	at       time.Time
	answered uint64
}

type quotaSample struct {
	at        time.Time
	remaining float64
	counted   int64
}

type quotaOptions struct {
	// Reserve tokens are never spent by the estimate: they absorb what the estimate cannot see
	// (another client of the same subscription, reordered answers).
	Reserve float64
	// FillTime is the assumed time for an empty bucket to refill until a rate is learnt (ARM:
	// writes 200 at 10/s, reads 250 at 25/s, so 10-20 s).
	FillTime time.Duration
	// MinWindow is the shortest sampling window a refill rate is learnt from.
	MinWindow time.Duration
}

// refillRate is the learnt rate, or the assumed one.
func (q *quota) refillRate() float64 {
	if q.rate > 0 {
		return q.rate
	}
	// A bucket first seen nearly empty looks tiny: never assume less than 1/s (ARM's limits are
	// 10/s and more; the rate learnt from the headers replaces this within seconds).
	return math.Max(1, q.capacity/q.opts.FillTime.Seconds())
}

// refill brings the estimate forward to now.
func (q *quota) refill(now time.Time) {
	if dt := now.Sub(q.at).Seconds(); dt > 0 {
		q.tokens = math.Min(q.capacity-float64(q.inflight), q.tokens+dt*q.refillRate())
		q.at = now
	}
}

// take decides whether one request may be sent now. When it may, the request is counted as in
// flight and spends a token of the estimate; when not, wait says when to ask again.
func (q *quota) take(now time.Time) (seq uint64, wait time.Duration, ok bool) {
	if now.Before(q.closed) {
		return 0, q.closed.Sub(now), false
	}
	// Nothing is known of the bucket, or nothing was heard of it for longer than it takes to
	// refill (the limits may have changed): one probe at a time until an answer tells.
	if !q.known || (q.limited && now.Sub(q.lastAnswer) > q.opts.FillTime) {
		if q.inflight > 0 {
			return 0, 0, false
		}
		return q.send(now), 0, true
	}
	if !q.limited {
		return q.send(now), 0, true
	}
	q.refill(now)
	if q.tokens-1 >= q.opts.Reserve {
		q.tokens--
		return q.send(now), 0, true
	}
	need := q.opts.Reserve + 1 - q.tokens
	// At least a millisecond: rounding must never turn "soon" into "when an answer comes".
	return 0, max(time.Millisecond, time.Duration(need/q.refillRate()*float64(time.Second))), false
}

// holdReason says why a request that cannot go at once is held: holdThrottled while a 429's
// Retry-After lasts, holdRateLimited when the gate's own pacing holds it (the estimate at the
// reserve, or a pause after a provider quota header reached 0), holdNone when it only waits
// for the answer to a probe or for the requests queued before it.
func (q *quota) holdReason(now time.Time) hold {
	switch {
	case now.Before(q.throttledUntil):
		return holdThrottled
	case now.Before(q.closed):
		return holdRateLimited
	case q.known && q.limited:
		q.refill(now)
		if q.tokens-1 < q.opts.Reserve {
			return holdRateLimited
		}
	}
	return holdNone
}

// hold is why the gate held a request.
type hold int

const (
	holdNone hold = iota
	holdThrottled
	holdRateLimited
)

func (q *quota) send(now time.Time) uint64 {
	if q.sent == nil {
		q.sent = map[uint64]quotaFlight{}
	}
	q.seq++
	q.sent[q.seq] = quotaFlight{at: now, answered: q.answered}
	q.inflight++
	return q.seq
}

// finish takes a request out of flight. It returns how many other requests overlapped it (let go
// before it was answered, and not answered before it was let go): ARM may have counted any of
// them after it, so its answer's remaining tokens must be lowered by that many to be safe.
func (q *quota) finish(seq uint64) (overlap int, sentAt time.Time) {
	f, ok := q.sent[seq]
	if !ok {
		return q.inflight, time.Time{}
	}
	delete(q.sent, seq)
	q.inflight--
	q.answered++
	// Requests in flight at once: bounded by the gate's concurrency, far below MaxInt.
	return int(q.seq - 1 - f.answered), f.at //nolint:gosec // G115: see above
}

// eta estimates how long until n more requests (queued before and including the caller) can go.
func (q *quota) eta(now time.Time, n int) time.Duration {
	var d time.Duration
	if now.Before(q.closed) {
		d = q.closed.Sub(now)
	}
	if !q.limited {
		return d
	}
	q.refill(now)
	need := q.opts.Reserve + float64(n) - q.tokens
	if need <= 0 {
		return d
	}
	return d + time.Duration(need/q.refillRate()*float64(time.Second))
}

// cancel undoes a take whose request was never sent.
func (q *quota) cancel(seq uint64) {
	if _, ok := q.sent[seq]; !ok {
		return
	}
	q.finish(seq)
	if q.limited {
		q.tokens++
	}
}

// answer is what the gate learnt from one response.
type answer struct {
	// throttled: a 429; closedFor from its Retry-After.
	throttled bool
	closedFor time.Duration
	// remaining is the subscription quota header, when present.
	remaining    float64
	hasRemaining bool
	// responded: there was a response (not a transport error).
	responded bool
	// pause closes the class without a 429: a provider's own quota header (not the
	// subscription's) reached 0.
	pause time.Duration
}

// observe takes the answer of request seq (0: an answer to no request of the gate's, e.g. a
// closure).
func (q *quota) observe(now time.Time, seq uint64, a answer) {
	overlap, sentAt := q.inflight, now
	if seq != 0 {
		overlap, sentAt = q.finish(seq)
	}
	if a.pause > 0 {
		if until := now.Add(a.pause); until.After(q.closed) {
			q.closed = until
		}
	}
	if a.throttled {
		first := !now.Before(q.closed)
		if until := now.Add(a.closedFor); until.After(q.closed) {
			q.closed = until
		}
		if until := now.Add(a.closedFor); until.After(q.throttledUntil) {
			q.throttledUntil = until
		}
		if first && q.known && q.limited {
			// The refill rate was overestimated (or another client spends the same quota, or the
			// limits changed): lower it once per closure and learn it again.
			f := 0.8
			if q.rate == 0 {
				f = 0.5 // only assumed
			}
			q.rate = math.Max(q.refillRate()*f, q.capacity/600)
			q.anchor = nil
		}
		if q.known && q.limited {
			// The bucket is empty; what is in flight may all count after this answer.
			q.refill(now)
			q.tokens = math.Min(q.tokens, -float64(q.inflight))
		}
		return
	}
	if !a.hasRemaining {
		// An answer without the header: ARM's own answers carry it, so this endpoint is not
		// throttled by bucket (a transport error or a closure teaches nothing).
		if a.responded {
			q.known = true
		}
		return
	}
	r := a.remaining
	if r+1 > q.capacity {
		q.capacity = r + 1
	}
	// r less the overlapping requests is a safe lower bound of the tokens left now (answers come
	// back in any order, and ARM may count requests in another order than they were let go):
	// it raises the estimate when higher, and replaces it when exact (nothing overlapped). r plus
	// the refill since the request left is an upper bound: it lowers a prediction that is too
	// high (a refill rate overestimated, another client of the subscription).
	fresh := r - float64(overlap)
	q.refill(now)
	switch upper := r + now.Sub(sentAt).Seconds()*q.refillRate(); {
	case !q.limited || overlap == 0:
		q.tokens = fresh
	case fresh > q.tokens:
		q.tokens = fresh
	case upper < q.tokens:
		q.tokens = upper
	}
	q.at, q.lastAnswer = now, now
	q.known, q.limited = true, true
	q.counted++
	q.sampleRate(now, r, overlap)
}

// sampleRate learns the refill rate: between two answers, the bucket gained refill*dt and lost
// the requests counted in between. Only windows in which the bucket stayed below half its size
// are used, so refill is never clipped at the capacity.
func (q *quota) sampleRate(now time.Time, r float64, overlap int) {
	gap := now.Sub(q.lastSample)
	q.lastSample = now
	if r >= q.capacity/2 || (q.anchor != nil && gap.Seconds() > q.capacity/q.refillRate()) {
		q.anchor = nil
		return
	}
	if q.anchor == nil {
		q.anchor = &quotaSample{at: now, remaining: r, counted: q.counted}
		return
	}
	dt := now.Sub(q.anchor.at)
	consumed := float64(q.counted - q.anchor.counted)
	// Reordering can misplace as many requests as overlap: wait for a window that dwarfs it.
	if dt < q.opts.MinWindow || consumed < 4*float64(overlap+q.inflight+1) {
		return
	}
	est := (r - q.anchor.remaining + consumed) / dt.Seconds()
	// Another client of the subscription can make the bucket look as if it did not refill at
	// all; keep a floor (the bucket refilling in 10 minutes) so the gate never stops for good.
	q.rate = math.Max(est, q.capacity/600)
}
