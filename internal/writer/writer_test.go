package writer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/azure-ccm/azure-ccm/internal/testutil"
)

type model struct {
	Items map[string]int `json:"items,omitempty"`
}

// fakeStore is an in-memory resource with ARM ETag semantics.
type fakeStore struct {
	mu      sync.Mutex
	obj     *model
	etag    int
	gets    int
	puts    int
	deletes int
	gate    chan struct{} // when non-nil, Get waits for it to close
	// slowGet, when non-nil, makes the next Get read the resource first and answer only when
	// slowGet closes (a response that arrives after later writes).
	slowGet chan struct{}
	putErr  error // returned once by the next Put
}

func (s *fakeStore) Get(ctx context.Context) (*model, string, error) {
	s.mu.Lock()
	gate, slow := s.gate, s.slowGet
	s.slowGet = nil
	if slow != nil {
		s.gets++
		obj, etag := jsonClone(s.obj), strconv.Itoa(s.etag)
		s.mu.Unlock()
		<-slow
		return obj, etag, nil
	}
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, "", ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gets++
	if s.obj == nil {
		return nil, "", nil
	}
	return jsonClone(s.obj), strconv.Itoa(s.etag), nil
}

func (s *fakeStore) Put(_ context.Context, obj *model, etag string) (*model, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.puts++
	if s.putErr != nil {
		err := s.putErr
		s.putErr = nil
		return nil, "", err
	}
	if (s.obj == nil && etag != "") || (s.obj != nil && etag != strconv.Itoa(s.etag)) {
		return nil, "", &azcore.ResponseError{StatusCode: http.StatusPreconditionFailed, ErrorCode: "PreconditionFailed"}
	}
	s.obj = jsonClone(obj)
	s.etag++
	return jsonClone(s.obj), strconv.Itoa(s.etag), nil
}

func (s *fakeStore) Delete(_ context.Context, etag string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deletes++
	if s.obj != nil && etag != strconv.Itoa(s.etag) {
		return ErrPreconditionFailed
	}
	s.obj = nil
	s.etag++
	return nil
}

// external is another writer (another process) changing the resource behind the writer's back.
func (s *fakeStore) external(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.obj == nil {
		s.obj = &model{}
	}
	if s.obj.Items == nil {
		s.obj.Items = map[string]int{}
	}
	s.obj.Items[key] = 1
	s.etag++
}

func (s *fakeStore) snapshot() (model, int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var m model
	if s.obj != nil {
		m = *jsonClone(s.obj)
	}
	return m, s.puts, s.gets
}

func set(key string, v int) Mutation[model] {
	return func(cur *model) (*model, error) {
		if cur == nil {
			cur = &model{}
		}
		if cur.Items == nil {
			cur.Items = map[string]int{}
		}
		cur.Items[key] = v
		return cur, nil
	}
}

func TestConcurrentIntentsShareOnePut(t *testing.T) {
	const n = 20
	store := &fakeStore{gate: make(chan struct{})}
	w := New[model](store, Options[model]{})
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, errs[i] = w.Submit(context.Background(), set(fmt.Sprint("k", i), i))
		}(i)
	}
	// Every intent queues while the batch's read is blocked.
	testutil.WaitFor(t, "all intents queued", func() bool { return w.Pending() == n })
	close(store.gate)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("intent %d: %v", i, err)
		}
	}
	m, puts, gets := store.snapshot()
	if puts != 1 || gets != 1 {
		t.Fatalf("want 1 GET and 1 PUT, got %d GETs, %d PUTs", gets, puts)
	}
	if len(m.Items) != n {
		t.Fatalf("want %d items, got %v", n, m.Items)
	}
}

// MaxBatch 1 (the benchmark's no-merging baseline) writes once per intent, in order.
func TestMaxBatchOneWritesPerIntent(t *testing.T) {
	const n = 5
	store := &fakeStore{gate: make(chan struct{})}
	w := New[model](store, Options[model]{MaxBatch: 1})
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, errs[i] = w.Submit(context.Background(), set(fmt.Sprint("k", i), i))
		}(i)
	}
	testutil.WaitFor(t, "all intents queued", func() bool { return w.Pending() == n })
	close(store.gate)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("intent %d: %v", i, err)
		}
	}
	m, puts, _ := store.snapshot()
	if puts != n || len(m.Items) != n {
		t.Fatalf("want %d PUTs and %d items, got %d PUTs, items %v", n, n, puts, m.Items)
	}
	if b := w.Stats().Batches; b != n {
		t.Fatalf("want %d batches, got %d", n, b)
	}
}

func TestPreconditionFailedRereadsAndReapplies(t *testing.T) {
	store := &fakeStore{}
	w := New[model](store, Options[model]{CacheTTL: time.Hour})
	if _, err := w.Submit(context.Background(), set("a", 1)); err != nil {
		t.Fatal(err)
	}
	// Someone else writes; the writer's cached ETag is now stale.
	store.external("foreign")
	got, err := w.Submit(context.Background(), set("b", 2))
	if err != nil {
		t.Fatal(err)
	}
	m, puts, _ := store.snapshot()
	if puts != 3 {
		t.Fatalf("want 3 PUTs (create, 412, retry), got %d", puts)
	}
	for _, k := range []string{"a", "b", "foreign"} {
		if _, ok := m.Items[k]; !ok {
			t.Fatalf("lost %q: %v", k, m.Items)
		}
	}
	if got == nil || got.Items["b"] != 2 {
		t.Fatalf("returned model %+v", got)
	}
	if st := w.Stats(); st.Conflicts != 1 {
		t.Fatalf("conflicts %d", st.Conflicts)
	}
}

func TestPreconditionFailedGivesUpAfterMaxAttempts(t *testing.T) {
	store := &fakeStore{}
	alwaysStale := &staleStore{fakeStore: store}
	w := New[model](alwaysStale, Options[model]{MaxAttempts: 3})
	_, err := w.Submit(context.Background(), set("a", 1))
	if !IsPreconditionFailed(err) {
		t.Fatalf("want 412 error, got %v", err)
	}
	if _, puts, _ := store.snapshot(); puts != 3 {
		t.Fatalf("want 3 attempts, got %d", puts)
	}
}

// staleStore changes the resource between every read and write.
type staleStore struct{ *fakeStore }

func (s *staleStore) Get(ctx context.Context) (*model, string, error) {
	obj, etag, err := s.fakeStore.Get(ctx)
	s.fakeStore.external("x")
	return obj, etag, err
}

func TestPerIntentErrors(t *testing.T) {
	store := &fakeStore{gate: make(chan struct{})}
	w := New[model](store, Options[model]{})
	bad := errors.New("invalid annotation")
	mutations := []Mutation[model]{
		set("ok1", 1),
		func(cur *model) (*model, error) { // edits, then fails: must be rolled back
			cur = jsonClone(cur)
			if cur == nil {
				cur = &model{Items: map[string]int{}}
			}
			cur.Items["bad"] = 1
			return cur, bad
		},
		func(cur *model) (*model, error) {
			if cur == nil {
				cur = &model{Items: map[string]int{}}
			}
			cur.Items["half"] = 1 // in place, then fail
			return nil, bad
		},
		func(*model) (*model, error) { panic("boom") },
		set("ok2", 2),
	}
	errs := make([]error, len(mutations))
	var wg sync.WaitGroup
	for i, m := range mutations {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = w.Submit(context.Background(), m)
		}()
	}
	testutil.WaitFor(t, "queued", func() bool { return w.Pending() == len(mutations) })
	close(store.gate)
	wg.Wait()
	if errs[0] != nil || errs[4] != nil {
		t.Fatalf("good intents failed: %v %v", errs[0], errs[4])
	}
	if !errors.Is(errs[1], bad) || !errors.Is(errs[2], bad) || errs[3] == nil {
		t.Fatalf("bad intents: %v %v %v", errs[1], errs[2], errs[3])
	}
	m, puts, _ := store.snapshot()
	if puts != 1 || len(m.Items) != 2 || m.Items["ok1"] != 1 || m.Items["ok2"] != 2 {
		t.Fatalf("puts=%d items=%v", puts, m.Items)
	}
}

func TestNoChangeNoWrite(t *testing.T) {
	store := &fakeStore{}
	w := New[model](store, Options[model]{CacheTTL: time.Hour})
	for i := 0; i < 3; i++ {
		if _, err := w.Submit(context.Background(), set("a", 1)); err != nil {
			t.Fatal(err)
		}
	}
	if _, puts, gets := store.snapshot(); puts != 1 || gets != 1 {
		t.Fatalf("steady state must not write or re-read: puts=%d gets=%d", puts, gets)
	}
}

func TestCacheExpiry(t *testing.T) {
	store := &fakeStore{}
	now := time.Unix(0, 0)
	w := New[model](store, Options[model]{CacheTTL: time.Minute, Now: func() time.Time { return now }})
	_, _ = w.Submit(context.Background(), set("a", 1))
	_, _ = w.Submit(context.Background(), set("a", 1))
	if _, _, gets := store.snapshot(); gets != 1 {
		t.Fatalf("fresh cache re-read: %d", gets)
	}
	now = now.Add(2 * time.Minute)
	_, _ = w.Submit(context.Background(), set("a", 1))
	if _, _, gets := store.snapshot(); gets != 2 {
		t.Fatalf("expired cache not re-read: %d", gets)
	}
	w.Invalidate()
	_, _ = w.Submit(context.Background(), set("a", 1))
	if _, _, gets := store.snapshot(); gets != 3 {
		t.Fatalf("invalidated cache not re-read: %d", gets)
	}
}

func TestDeleteWhenMutationReturnsNil(t *testing.T) {
	store := &fakeStore{}
	w := New[model](store, Options[model]{})
	_, _ = w.Submit(context.Background(), set("a", 1))
	got, err := w.Submit(context.Background(), func(*model) (*model, error) { return nil, nil })
	if err != nil || got != nil {
		t.Fatalf("delete: %v %v", got, err)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if store.obj != nil || store.deletes != 1 {
		t.Fatalf("not deleted: %+v", store.obj)
	}
}

func TestWriteErrorReachesEveryAcceptedIntent(t *testing.T) {
	store := &fakeStore{putErr: &azcore.ResponseError{StatusCode: http.StatusTooManyRequests}}
	w := New[model](store, Options[model]{})
	_, err := w.Submit(context.Background(), set("a", 1))
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("want 429, got %v", err)
	}
	if _, err := w.Submit(context.Background(), set("a", 1)); err != nil {
		t.Fatalf("after error: %v", err)
	}
}

func TestCancelledIntentIsNotApplied(t *testing.T) {
	store := &fakeStore{gate: make(chan struct{})}
	w := New[model](store, Options[model]{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := w.Submit(ctx, set("cancelled", 1)); done <- err }()
	testutil.WaitFor(t, "queued", func() bool { return w.Pending() == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("want canceled, got %v", err)
	}
	close(store.gate)
	if _, err := w.Submit(context.Background(), set("b", 1)); err != nil {
		t.Fatal(err)
	}
	m, _, _ := store.snapshot()
	if _, ok := m.Items["cancelled"]; ok {
		t.Fatal("cancelled intent applied")
	}
}

func TestNoLostUpdateUnderConcurrency(t *testing.T) {
	store := &fakeStore{}
	w := New[model](store, Options[model]{CacheTTL: time.Hour, MaxAttempts: 100})
	const n = 100
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var extWG sync.WaitGroup
	externalWrites := 0
	extWG.Add(1)
	go func() { // a concurrent foreign writer keeps invalidating ETags
		defer extWG.Done()
		for i := 0; i < 30; i++ {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Microsecond): // the pace of the foreign writes, not a wait
				store.external(fmt.Sprint("ext", i))
				externalWrites++
			}
		}
	}()
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, err := w.Submit(context.Background(), set(fmt.Sprint("k", i), i))
			errs <- err
		}(i)
	}
	wg.Wait()
	close(stop)
	extWG.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	m, puts, _ := store.snapshot()
	for i := 0; i < n; i++ {
		if m.Items[fmt.Sprint("k", i)] != i {
			t.Fatalf("lost update k%d (puts=%d)", i, puts)
		}
	}
	ext := 0
	for k := range m.Items {
		if len(k) > 3 && k[:3] == "ext" {
			ext++
		}
	}
	if ext != externalWrites {
		t.Fatalf("foreign updates lost: %d of %d present", ext, externalWrites)
	}
	if puts >= 2*n {
		t.Fatalf("no batching: %d puts for %d intents", puts, n)
	}
}

func TestRegistrySharesWriterPerID(t *testing.T) {
	created := 0
	r := NewRegistry(func(string) Store[model] { created++; return &fakeStore{} }, Options[model]{})
	a := r.For("/subscriptions/s/resourceGroups/RG/providers/Microsoft.Network/loadBalancers/kubernetes")
	b := r.For("/subscriptions/s/resourcegroups/rg/providers/microsoft.network/loadbalancers/kubernetes")
	c := r.For("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/kubernetes-internal")
	if a != b || a == c || created != 2 {
		t.Fatalf("registry: a==b %v a==c %v created %d", a == b, a == c, created)
	}
	r.InvalidateAll()
}

// With Gather, a mutation that arrives while a batch (read from the cache) waits joins it.
func TestGatherMergesLateArrivals(t *testing.T) {
	store := &fakeStore{}
	w := New[model](store, Options[model]{CacheTTL: time.Hour, Gather: time.Second})
	if _, err := w.Submit(context.Background(), set("warm", 1)); err != nil {
		t.Fatal(err)
	}
	_, putsBefore, _ := store.snapshot()
	errs := make(chan error, 2)
	go func() { _, err := w.Submit(context.Background(), set("a", 1)); errs <- err }()
	// The second batch has started (and is gathering) while "a" is still pending.
	testutil.WaitFor(t, "second batch gathering", func() bool { return w.Stats().Batches == 2 && w.Pending() == 1 })
	go func() { _, err := w.Submit(context.Background(), set("b", 1)); errs <- err }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	m, puts, _ := store.snapshot()
	if puts-putsBefore != 1 {
		t.Fatalf("want a and b in one PUT, got %d PUTs", puts-putsBefore)
	}
	if m.Items["a"] != 1 || m.Items["b"] != 1 {
		t.Fatalf("items: %v", m.Items)
	}
}

// A read that was answered before a write but arrives after it must not replace the written
// model in the cache: a reconcile deciding from the cache would miss the write (a deletion
// deciding that a frontend just created is not there leaves it behind).
func TestSlowReadDoesNotOverwriteNewerCache(t *testing.T) {
	st := &fakeStore{obj: &model{Items: map[string]int{"old": 1}}, etag: 1}
	w := New[model](st, Options[model]{CacheTTL: time.Minute})
	slow := make(chan struct{})
	st.mu.Lock()
	st.slowGet = slow
	st.mu.Unlock()
	read := make(chan *model)
	go func() {
		m, _ := w.Get(context.Background())
		read <- m
	}()
	testutil.WaitFor(t, "the slow read to take its snapshot", func() bool { _, _, gets := st.snapshot(); return gets == 1 })
	if _, err := w.Submit(context.Background(), set("new", 2)); err != nil {
		t.Fatal(err)
	}
	close(slow)
	if m := <-read; m.Items["new"] != 0 {
		t.Fatalf("the slow read saw the later write: %v", m.Items)
	}
	got, err := w.Peek(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got.Items["new"] != 2 {
		t.Fatalf("cache holds %v after the write, want the written model", got.Items)
	}
	if _, puts, _ := st.snapshot(); puts != 1 {
		t.Fatalf("%d puts", puts)
	}
}

// childStore treats each item as a child that has its own write API (as a backend pool of a
// load balancer does).
type childStore struct {
	fakeStore
	childPuts int
}

func (s *childStore) OnlyChildChanged(cur, work *model, child string) bool {
	if _, ok := cur.Items[child]; !ok {
		return false
	}
	if _, ok := work.Items[child]; !ok || len(cur.Items) != len(work.Items) {
		return false
	}
	for k, v := range work.Items {
		if w, ok := cur.Items[k]; k != child && (!ok || w != v) {
			return false
		}
	}
	return true
}

func (s *childStore) PutChild(_ context.Context, work *model, child, etag string) (*model, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.childPuts++
	if s.obj == nil || etag != strconv.Itoa(s.etag) {
		return nil, &azcore.ResponseError{StatusCode: http.StatusPreconditionFailed, ErrorCode: "PreconditionFailed"}
	}
	s.obj.Items[child] = work.Items[child]
	s.etag++
	return jsonClone(s.obj), nil
}

func add(key string, d int) Mutation[model] {
	return func(cur *model) (*model, error) {
		cur.Items[key] += d
		return cur, nil
	}
}

func TestChildWrites(t *testing.T) {
	type submission struct {
		child string // "" : Submit
		m     Mutation[model]
	}
	for _, tc := range []struct {
		name                string
		batch               []submission
		wantPuts, wantChild int
		want                map[string]int
	}{
		{name: "one child changed by child mutations → child API",
			batch: []submission{{"pool", add("pool", 1)}, {"pool", add("pool", 1)}}, wantChild: 1,
			want: map[string]int{"pool": 3, "rule": 1}},
		{name: "a whole-resource mutation in the batch → one whole write",
			batch: []submission{{"pool", set("pool", 2)}, {"", set("rule", 5)}}, wantPuts: 1,
			want: map[string]int{"pool": 2, "rule": 5}},
		{name: "two children → one whole write",
			batch: []submission{{"pool", set("pool", 2)}, {"other", set("other", 2)}}, wantPuts: 1,
			want: map[string]int{"pool": 2, "rule": 1, "other": 2}},
		{name: "a child mutation that changed something else → whole write, nothing lost",
			batch:    []submission{{"pool", func(cur *model) (*model, error) { cur.Items["pool"], cur.Items["rule"] = 4, 4; return cur, nil }}},
			wantPuts: 1, want: map[string]int{"pool": 4, "rule": 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &childStore{}
			s.obj, s.etag = &model{Items: map[string]int{"pool": 1, "rule": 1}}, 1
			// The batch's read waits until every submission is queued: one batch, whatever the timing.
			s.gate = make(chan struct{})
			w := New[model](s, Options[model]{CacheTTL: time.Minute})
			var wg sync.WaitGroup
			errs := make([]error, len(tc.batch))
			for i, sub := range tc.batch {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if sub.child == "" {
						_, errs[i] = w.Submit(context.Background(), sub.m)
					} else {
						_, errs[i] = w.SubmitChild(context.Background(), sub.child, sub.m)
					}
				}()
			}
			testutil.WaitFor(t, "every submission queued", func() bool { return w.Pending() == len(tc.batch) })
			close(s.gate)
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("submission %d: %v", i, err)
				}
			}
			got, puts, _ := s.snapshot()
			if puts != tc.wantPuts || s.childPuts != tc.wantChild {
				t.Errorf("whole writes %d, child writes %d; want %d, %d", puts, s.childPuts, tc.wantPuts, tc.wantChild)
			}
			if fmt.Sprint(got.Items) != fmt.Sprint(tc.want) {
				t.Errorf("stored %v, want %v", got.Items, tc.want)
			}
			// After a child write the writer does not know the new ETag: it reads again, and a
			// later whole write does not fail with 412.
			if _, err := w.Submit(context.Background(), set("after", 1)); err != nil {
				t.Fatalf("write after: %v", err)
			}
			if st := w.Stats(); st.Conflicts != 0 {
				t.Errorf("conflicts %d, want 0", st.Conflicts)
			}
		})
	}
}

// A seed from a list saves the batch's GET when it is right, and costs one 412 and the GET when
// it is stale; a fresh cache and a seed without an ETag are never replaced by it.
func TestSeed(t *testing.T) {
	for _, tc := range []struct {
		name string
		// prepare sets up the store and the writer, then seeds it.
		prepare    func(s *fakeStore, w *Writer[model])
		gets, puts int
		conflicts  int
		want       map[string]int
	}{
		{"absent, right: created without a GET", func(s *fakeStore, w *Writer[model]) { w.Seed(nil, "") },
			0, 1, 0, map[string]int{"a": 1}},
		{"existing, right: updated without a GET", func(s *fakeStore, w *Writer[model]) {
			s.external("x")
			w.Seed(&model{Items: map[string]int{"x": 1}}, "1")
		}, 0, 1, 0, map[string]int{"a": 1, "x": 1}},
		{"absent, stale: the create is refused, then read and updated", func(s *fakeStore, w *Writer[model]) {
			s.external("x")
			w.Seed(nil, "")
		}, 1, 2, 1, map[string]int{"a": 1, "x": 1}},
		{"existing, stale ETag: refused, then read", func(s *fakeStore, w *Writer[model]) {
			s.external("x")
			s.external("y")
			w.Seed(&model{Items: map[string]int{"x": 1}}, "1")
		}, 1, 2, 1, map[string]int{"a": 1, "x": 1, "y": 1}},
		{"a fresh cache is kept", func(s *fakeStore, w *Writer[model]) {
			if _, err := w.Submit(context.Background(), set("b", 1)); err != nil {
				t.Fatal(err)
			}
			w.Seed(nil, "") // older than the write the writer made
		}, 1, 2, 0, map[string]int{"a": 1, "b": 1}},
		{"an existing model without an ETag is not used", func(s *fakeStore, w *Writer[model]) {
			s.external("x")
			w.Seed(&model{}, "")
		}, 1, 1, 0, map[string]int{"a": 1, "x": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &fakeStore{}
			w := New[model](store, Options[model]{CacheTTL: time.Minute})
			tc.prepare(store, w)
			if _, err := w.Submit(context.Background(), set("a", 1)); err != nil {
				t.Fatal(err)
			}
			got, puts, gets := store.snapshot()
			if gets != tc.gets || puts != tc.puts || w.Stats().Conflicts != tc.conflicts || !reflect.DeepEqual(got.Items, tc.want) {
				t.Errorf("gets %d puts %d conflicts %d items %v; want %d %d %d %v", gets, puts, w.Stats().Conflicts, got.Items,
					tc.gets, tc.puts, tc.conflicts, tc.want)
			}
		})
	}
}

// Readers that find no fresh cache share the read in flight: ten at once cost one GET. A
// reader whose read's starter gave up reads again with its own context.
func TestConcurrentReadersShareOneRead(t *testing.T) {
	s := &fakeStore{obj: &model{Items: map[string]int{"a": 1}}, gate: make(chan struct{})}
	w := New[model](s, Options[model]{CacheTTL: time.Minute})
	starter, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 11)
	go func() { _, err := w.Peek(starter); errs <- err }()
	testutil.WaitFor(t, "the first read to start", func() bool { return w.Stats().Gets > 0 })
	got := make(chan *model, 10)
	for range 10 {
		go func() {
			m, err := w.Peek(context.Background())
			errs <- err
			got <- m
		}()
	}
	testutil.WaitFor(t, "the ten to join the read in flight", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.reading != nil && w.reading.joined == 10
	})
	if n := w.Stats().Gets; n != 1 {
		t.Fatalf("%d reads started, want 1 shared", n)
	}
	cancel() // the starter gives up: its read ends with its context
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("the starter got %v, want its context's end", err)
	}
	close(s.gate)
	for range 10 {
		if err := <-errs; err != nil {
			t.Fatalf("a joiner got %v: it must read again with its own context", err)
		}
		if m := <-got; m == nil || m.Items["a"] != 1 {
			t.Fatalf("a joiner got %v", m)
		}
	}
	if n := w.Stats().Gets; n != 2 {
		t.Fatalf("%d reads in all, want 2 (the cancelled one and one shared by the ten)", n)
	}
}
