package writer

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/azure-ccm/azure-ccm/internal/testutil"
)

// An action runs in the writer's turn: after the mutations queued before it are written, before
// those queued after it, alone; the cache is read again afterwards.
func TestActionRunsInTurn(t *testing.T) {
	s := &fakeStore{obj: &model{Items: map[string]int{"init": 1}}, gate: make(chan struct{})}
	w := New[model](s, Options[model]{CacheTTL: time.Minute})
	set := func(k string, v int) Mutation[model] {
		return func(cur *model) (*model, error) { cur.Items[k] = v; return cur, nil }
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	wg.Add(1)
	go func() { defer wg.Done(); _, err := w.Submit(context.Background(), set("a", 1)); errs <- err }()
	waitBatchReading(t, w)
	var seen map[string]int
	wg.Add(2)
	go func() {
		defer wg.Done()
		errs <- w.Do(context.Background(), func(ctx context.Context, st Store[model]) error {
			obj, _, err := st.Get(ctx)
			if err == nil {
				seen = obj.Items
				s.mu.Lock()
				s.obj.Items["action"] = 1 // the action changes the resource on Azure's side
				s.etag++
				s.mu.Unlock()
			}
			return err
		})
	}()
	waitPending(t, w, 2)
	go func() { defer wg.Done(); _, err := w.Submit(context.Background(), set("b", 2)); errs <- err }()
	waitPending(t, w, 3)
	openGateAndWait(t, s, &wg, errs)
	if seen["a"] != 1 || seen["b"] != 0 {
		t.Fatalf("the action saw %v, want a written and b not yet", seen)
	}
	got, err := w.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got.Items["a"] != 1 || got.Items["b"] != 2 || got.Items["action"] != 1 {
		t.Fatalf("resource %v: the batch after the action must have re-read it", got.Items)
	}
	if s.puts != 2 {
		t.Fatalf("%d puts, want 2 (the action is never batched)", s.puts)
	}
}

// openGateAndWait lets the store's reads through, waits for the callers and fails on any error.
func openGateAndWait(t *testing.T, s *fakeStore, wg *sync.WaitGroup, errs chan error) {
	t.Helper()
	close(s.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// waitBatchReading waits until the writer's first batch is reading (its one mutation still
// queued, so mutations queued now join it).
func waitBatchReading(t *testing.T, w *Writer[model]) {
	t.Helper()
	testutil.WaitFor(t, "the first batch to read", func() bool { return w.Stats().Gets > 0 && w.Pending() == 1 })
}

func waitPending(t *testing.T, w *Writer[model], n int) {
	t.Helper()
	testutil.WaitFor(t, fmt.Sprintf("%d mutations queued", n), func() bool { return w.Pending() == n })
}

// An action queued with DoBetween lets the mutations queued after it join the batch being
// taken, and runs after that batch; one queued with Do splits it (TestActionRunsInTurn).
func TestActionBetweenWritesDoesNotSplitTheBatch(t *testing.T) {
	s := &fakeStore{obj: &model{Items: map[string]int{"init": 1}}, gate: make(chan struct{})}
	w := New[model](s, Options[model]{CacheTTL: time.Minute})
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	submit := func(k string) {
		wg.Add(1)
		go func() { defer wg.Done(); _, err := w.Submit(context.Background(), set(k, 1)); errs <- err }()
	}
	submit("a")
	waitBatchReading(t, w)
	var mu sync.Mutex
	var seen []map[string]int
	action := func(ctx context.Context, st Store[model]) error {
		obj, _, err := st.Get(ctx)
		if err == nil {
			mu.Lock()
			seen = append(seen, obj.Items)
			mu.Unlock()
		}
		return err
	}
	// a (being read), action, b, action, c: the batch takes a, b and c; both actions follow it.
	for i, k := range []string{"b", "c"} {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- w.DoBetween(context.Background(), action) }()
		waitPending(t, w, 2+2*i)
		submit(k)
		waitPending(t, w, 3+2*i)
	}
	openGateAndWait(t, s, &wg, errs)
	if s.puts != 1 {
		t.Fatalf("%d puts, want 1: the actions between writes must not split the batch", s.puts)
	}
	if len(seen) != 2 {
		t.Fatalf("%d actions ran, want 2", len(seen))
	}
	for _, items := range seen {
		if items["a"] != 1 || items["b"] != 1 || items["c"] != 1 {
			t.Fatalf("an action saw %v: it must run after the batch it was queued beside", items)
		}
	}
}
