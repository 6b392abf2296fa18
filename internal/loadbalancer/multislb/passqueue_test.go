package multislb

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/azure-ccm/azure-ccm/internal/testutil"
)

// Callers that arrive while a pass runs share one pass after it, which sees the newest input;
// no two passes overlap.
func TestPassQueueCallersShareTheNextPass(t *testing.T) {
	var q passQueue[int]
	var (
		mu      sync.Mutex
		ran     []int
		running int
		overlap bool
	)
	release := make(chan struct{})
	started := make(chan struct{}, 10)
	run := func(_ context.Context, in int) error {
		mu.Lock()
		running++
		overlap = overlap || running > 1
		ran = append(ran, in)
		mu.Unlock()
		started <- struct{}{}
		<-release
		mu.Lock()
		running--
		mu.Unlock()
		return nil
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = q.do(context.Background(), 0, run) }()
	<-started // pass 0 runs

	// Ten callers arrive in order while it runs.
	const callers = 10
	for i := 1; i <= callers; i++ {
		wg.Add(1)
		go func(in int) { defer wg.Done(); _ = q.do(context.Background(), in, run) }(i)
		waitQueued(t, &q, i)
	}
	close(release)
	wg.Wait()
	if overlap {
		t.Error("two passes ran at once")
	}
	if len(ran) != 2 || ran[1] != callers {
		t.Fatalf("passes ran with %v, want [0 %d]: the callers share one pass with the newest input", ran, callers)
	}
}

// Every caller gets the error of the pass that served it.
func TestPassQueueJoinersGetThePassError(t *testing.T) {
	var q passQueue[int]
	boom := errors.New("boom")
	release := make(chan struct{})
	started := make(chan struct{}, 3)
	run := func(_ context.Context, in int) error {
		started <- struct{}{}
		<-release
		if in == 2 {
			return boom
		}
		return nil
	}
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = q.do(context.Background(), i, run) }()
		if i == 0 {
			<-started
			continue
		}
		waitQueued(t, &q, i)
	}
	close(release)
	wg.Wait()
	if errs[0] != nil || !errors.Is(errs[1], boom) || !errors.Is(errs[2], boom) {
		t.Fatalf("errors %v, want [nil boom boom]", errs)
	}
}

// A pass that ended because its leader's context ended does not fail the callers that joined
// it with a live context: one of them runs the pass again.
func TestPassQueueLeaderContextEnds(t *testing.T) {
	var q passQueue[int]
	release := make(chan struct{})
	started := make(chan struct{}, 3)
	var mu sync.Mutex
	var ran []int
	run := func(ctx context.Context, in int) error {
		mu.Lock()
		ran = append(ran, in)
		mu.Unlock()
		started <- struct{}{}
		if in == 0 {
			<-release
		}
		return ctx.Err()
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = q.do(context.Background(), 0, run) }()
	<-started

	// The leader of the queued pass has a context that ends before its pass runs; a second
	// caller joins it with a live one.
	dead, cancel := context.WithCancel(context.Background())
	var leaderErr, joinerErr error
	wg.Add(2)
	go func() { defer wg.Done(); leaderErr = q.do(dead, 1, run) }()
	testutil.WaitFor(t, "a pass queued", func() bool { q.mu.Lock(); defer q.mu.Unlock(); return q.queued != nil })
	go func() { defer wg.Done(); joinerErr = q.do(context.Background(), 2, run) }()
	waitQueued(t, &q, 2)
	cancel()
	close(release)
	wg.Wait()
	if !errors.Is(leaderErr, context.Canceled) || joinerErr != nil {
		t.Fatalf("leader %v, joiner %v; want canceled and nil", leaderErr, joinerErr)
	}
	if len(ran) != 3 || ran[2] != 2 {
		t.Fatalf("passes %v, want [0 2 2]: the joiner re-ran the pass on its own context", ran)
	}
}

// waitQueued waits until the pass queued next has input in.
func waitQueued(t *testing.T, q *passQueue[int], in int) {
	t.Helper()
	testutil.WaitFor(t, fmt.Sprintf("the queued pass to have input %d", in), func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.queued != nil && q.queued.in == in
	})
}
