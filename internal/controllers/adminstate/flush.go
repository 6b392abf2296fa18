package adminstate

import (
	"context"
	"sync"
	"time"
)

// flusher coalesces the admin-state updates of one backend pool. Each round is one
// level-triggered mutation submitted to the pool's writer: it applies the desired state of
// every node known at the time it runs. So a node whose change was observed before a round's
// mutation ran is covered by that round, and many nodes draining at once cost one write.
type flusher struct {
	// A round gathers joiners until none came for window, or for at most maxWindow: taints
	// applied together reach the controller spread over tens to hundreds of milliseconds, and
	// a quiet gap, not a fixed delay, tells that the burst is over.
	window, maxWindow time.Duration
	run               func(ctx context.Context, pools []poolRef, applied func()) error
	// life is the controller's run context: a round serves every waiter that joins it, so it
	// runs until the controller stops, not until the waiter that started it gives up.
	life context.Context

	mu       sync.Mutex
	pools    []poolRef // the load balancer's cluster pools, as last resolved
	gather   *round    // collecting joiners, not started yet
	inflight []*round  // started, not finished
	covered  time.Time // apply time of the latest successful round
}

type round struct {
	done      chan struct{}
	joined    chan struct{} // a joiner arrived while gathering (buffered, coalescing)
	err       error
	appliedAt time.Time // when the mutation first ran (zero until then)
}

// poke extends the gathering of the round being gathered (if any): another node changed, so
// the burst goes on even when every worker is already waiting on this round.
func (f *flusher) poke() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gather != nil {
		select {
		case f.gather.joined <- struct{}{}:
		default:
		}
	}
}

// setPools records the latest list of the load balancer's cluster pools.
func (f *flusher) setPools(pools []poolRef) {
	f.mu.Lock()
	f.pools = pools
	f.mu.Unlock()
}

// wait returns once a round whose mutation ran after since has succeeded (at once if one
// already has), or with the error of the round it joined.
func (f *flusher) wait(ctx context.Context, since time.Time) error {
	f.mu.Lock()
	if f.covered.After(since) {
		f.mu.Unlock()
		return nil
	}
	r := f.joinable(since)
	switch {
	case r == nil:
		r = &round{done: make(chan struct{}), joined: make(chan struct{}, 1)}
		f.gather = r
		go f.start(r)
	case r == f.gather:
		select {
		case r.joined <- struct{}{}:
		default:
		}
	}
	f.mu.Unlock()
	select {
	case <-r.done:
		if r.err == nil && !r.appliedAt.After(since) {
			// The round ran before the change was seen (it cannot, as joiners only pick
			// rounds applying later; kept as a guard): go again.
			return f.wait(ctx, since)
		}
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// joinable is a round that will cover since: one still gathering, or one in flight whose
// mutation ran after since.
func (f *flusher) joinable(since time.Time) *round {
	for _, r := range f.inflight {
		if r.appliedAt.After(since) {
			return r
		}
	}
	return f.gather
}

func (f *flusher) start(r *round) {
	if f.window > 0 {
		deadline := time.NewTimer(max(f.maxWindow, f.window))
		idle := time.NewTimer(f.window)
	gather:
		for {
			select {
			case <-r.joined:
				idle.Reset(f.window)
			case <-idle.C:
				break gather
			case <-deadline.C:
				break gather
			}
		}
		idle.Stop()
		deadline.Stop()
	}
	f.mu.Lock()
	f.gather = nil
	f.inflight = append(f.inflight, r)
	pools := f.pools
	f.mu.Unlock()

	err := f.run(f.life, pools, func() {
		f.mu.Lock()
		if r.appliedAt.IsZero() {
			r.appliedAt = time.Now()
		}
		f.mu.Unlock()
	})

	f.mu.Lock()
	for i, x := range f.inflight {
		if x == r {
			f.inflight = append(f.inflight[:i], f.inflight[i+1:]...)
			break
		}
	}
	if err == nil && r.appliedAt.IsZero() {
		// The pool did not exist or could not be read into a mutation: nothing to cover,
		// count the round as applied now so joiners are released.
		r.appliedAt = time.Now()
	}
	if err == nil && r.appliedAt.After(f.covered) {
		f.covered = r.appliedAt
	}
	r.err = err
	f.mu.Unlock()
	close(r.done)
}
