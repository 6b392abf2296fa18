package multislb

import (
	"context"
	"errors"
	"sync"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/plan"
)

// nodePassInput is what a node placement pass works from.
type nodePassInput struct {
	base  *plan.Cluster
	nodes *nodeView
}

// passQueue runs passes one at a time and lets callers share them. A caller that arrives while
// a pass runs does not queue a pass of its own: it joins the one queued next, which starts
// after every caller that joined it asked (so it sees at least what each of them saw) and runs
// with the newest caller's input. However many callers arrive during a pass, it is followed by
// one pass, not one each.
type passQueue[In any] struct {
	// observe is told how each call was served: joined, ran or failed (nil: not told).
	observe func(result string)

	mu      sync.Mutex
	running *pass[In]
	queued  *pass[In]
}

type pass[In any] struct {
	in   In
	done chan struct{}
	err  error
}

// do runs run(in) — or has a pass that starts after this call run it with newer input — and
// returns that pass's error.
func (q *passQueue[In]) do(ctx context.Context, in In, run func(context.Context, In) error) error {
	for {
		q.mu.Lock()
		if p := q.queued; p != nil {
			p.in = in
			q.mu.Unlock()
			q.count("joined")
			select {
			case <-p.done:
			case <-ctx.Done():
				return ctx.Err()
			}
			if isContextEnd(p.err) && ctx.Err() == nil {
				// The pass ran on its leader's context, which ended; ours has not.
				continue
			}
			return p.err
		}
		p := &pass[In]{in: in, done: make(chan struct{})}
		q.queued = p
		prev := q.running
		q.mu.Unlock()
		if prev != nil {
			// Not abandoned when ctx ends: callers that joined p wait for it to run.
			<-prev.done
		}
		q.mu.Lock()
		q.queued, q.running = nil, p
		in = p.in
		q.mu.Unlock()

		p.err = run(ctx, in)
		if p.err != nil {
			q.count("failed")
		} else {
			q.count("ran")
		}
		q.mu.Lock()
		q.running = nil
		q.mu.Unlock()
		close(p.done)
		return p.err
	}
}

func (q *passQueue[In]) count(result string) {
	if q.observe != nil {
		q.observe(result)
	}
}

func isContextEnd(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
