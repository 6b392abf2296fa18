package keyqueue

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/azure-ccm/azure-ccm/internal/testutil"
)

// A failing key is retried with backoff until it succeeds, each failure reported with the
// retries before it; other keys are not held up by it.
func TestRetriesUntilSyncSucceeds(t *testing.T) {
	var mu sync.Mutex
	calls := map[string]int{}
	var failed []int
	q := New(Options[string]{Name: "test", RetryBase: time.Millisecond, RetryMax: 10 * time.Millisecond,
		Sync: func(_ context.Context, k string) error {
			mu.Lock()
			defer mu.Unlock()
			calls[k]++
			if k == "flaky" && calls[k] < 3 {
				return errors.New("not yet")
			}
			return nil
		},
		Failed: func(k string, _ error, retries int) {
			mu.Lock()
			defer mu.Unlock()
			failed = append(failed, retries)
		}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q.Start(ctx, 2)
	q.Add("flaky")
	q.Add("fine")
	testutil.WaitFor(t, "flaky synced three times and fine once", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return calls["flaky"] == 3 && calls["fine"] == 1
	})
	mu.Lock()
	defer mu.Unlock()
	if len(failed) != 2 || failed[0] != 0 || failed[1] != 1 {
		t.Errorf("failures reported with retries %v, want [0 1]", failed)
	}
}

// A key added while it is being synced is synced again afterwards, never by two workers at once.
func TestKeyNeverSyncedTwiceAtOnce(t *testing.T) {
	var mu sync.Mutex
	running, overlap, calls := 0, false, 0
	entered := make(chan struct{})
	release := make(chan struct{})
	q := New(Options[string]{Name: "test", Sync: func(context.Context, string) error {
		mu.Lock()
		running++
		overlap = overlap || running > 1
		calls++
		first := calls == 1
		mu.Unlock()
		if first {
			close(entered)
			<-release
		}
		mu.Lock()
		running--
		mu.Unlock()
		return nil
	}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q.Start(ctx, 4)
	q.Add("k")
	<-entered
	q.Add("k")
	close(release)
	testutil.WaitFor(t, "the key synced again after the first sync", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return calls == 2 && running == 0
	})
	mu.Lock()
	defer mu.Unlock()
	if overlap {
		t.Error("two workers synced the same key at once")
	}
}

// When ctx ends the queue shuts down: keys added afterwards are not synced.
func TestStopsWithContext(t *testing.T) {
	synced := make(chan string, 4)
	q := New(Options[string]{Name: "test", Sync: func(_ context.Context, k string) error { synced <- k; return nil }})
	ctx, cancel := context.WithCancel(context.Background())
	q.Start(ctx, 1)
	q.Add("before")
	if k := <-synced; k != "before" {
		t.Fatalf("synced %q", k)
	}
	cancel()
	testutil.WaitFor(t, "the queue shut down", func() bool { return q.q.ShuttingDown() })
	q.Add("after")
	if q.Len() != 0 {
		t.Errorf("a shut-down queue took a key (%d waiting)", q.Len())
	}
}
