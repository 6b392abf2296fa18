package parallel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestDo(t *testing.T) {
	for _, tc := range []struct {
		name       string
		workers, n int
		failing    map[int]bool
	}{
		{"nothing to do", 4, 0, nil},
		{"one worker", 1, 5, nil},
		{"zero workers means one", 0, 3, map[int]bool{1: true}},
		{"more workers than calls", 8, 3, map[int]bool{0: true, 2: true}},
		{"bounded", 3, 40, map[int]bool{7: true, 39: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var running, peak atomic.Int32
			var mu sync.Mutex
			called := map[int]int{}
			// The first calls wait until as many run at once as the bound allows, and a moment
			// longer, so an unbounded Do shows more than the bound and a bounded one reaches it.
			limit := int32(max(tc.workers, 1))
			full := make(chan struct{})
			var fullOnce sync.Once
			errs := Do(context.Background(), tc.workers, tc.n, func(_ context.Context, i int) error {
				r := running.Add(1)
				defer running.Add(-1)
				for {
					p := peak.Load()
					if r <= p || peak.CompareAndSwap(p, r) {
						break
					}
				}
				if r >= min(limit, int32(tc.n)) {
					// A moment for an unbounded Do to start more calls; a bounded one cannot.
					time.AfterFunc(20*time.Millisecond, func() { fullOnce.Do(func() { close(full) }) })
				}
				<-full
				mu.Lock()
				called[i]++
				mu.Unlock()
				if tc.failing[i] {
					return fmt.Errorf("call %d failed", i)
				}
				return nil
			})
			if len(errs) != tc.n {
				t.Fatalf("%d errors, want one per call (%d)", len(errs), tc.n)
			}
			for i := range tc.n {
				if called[i] != 1 {
					t.Errorf("call %d made %d times, want 1", i, called[i])
				}
				if got, want := errs[i] != nil, tc.failing[i]; got != want {
					t.Errorf("call %d: error %v, want failure %v", i, errs[i], want)
				}
			}
			if peak.Load() > limit {
				t.Errorf("%d calls ran at once, want at most %d", peak.Load(), limit)
			}
		})
	}
}

// TestDoCallsEveryIndexAfterCancel: a cancelled context does not skip calls, so no index is
// left with a nil error it did not earn.
func TestDoCallsEveryIndexAfterCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	errs := Do(ctx, 2, 10, func(ctx context.Context, _ int) error { return ctx.Err() })
	for i, err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("call %d: %v, want context.Canceled", i, err)
		}
	}
}
