package writer

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"
)

// TestExternalChanges: the count moves when a read finds the resource changed by someone else
// (seen by a read, by a 412, or after an action), never with the writer's own writes.
func TestExternalChanges(t *testing.T) {
	ctx := context.Background()
	for _, ttl := range []time.Duration{time.Hour, 0} {
		store := &fakeStore{}
		w := New[model](store, Options[model]{CacheTTL: ttl})
		peek := func() uint64 {
			t.Helper()
			w.Invalidate()
			if _, err := w.Peek(ctx); err != nil {
				t.Fatal(err)
			}
			return w.ExternalChanges()
		}
		first := peek() // the first read knows nothing before it
		if first != 1 {
			t.Errorf("ttl %v: first read counted %d", ttl, first)
		}
		for i := range 3 {
			if _, err := w.Submit(ctx, set(fmt.Sprint("own", i), i)); err != nil {
				t.Fatal(err)
			}
		}
		if n := peek(); n != first {
			t.Errorf("ttl %v: own writes counted: %d → %d", ttl, first, n)
		}
		store.external("foreign")
		if n := peek(); n != first+1 {
			t.Errorf("ttl %v: a change by someone else, seen by a read: %d → %d", ttl, first, n)
		}
		// Someone else writes between the writer's read and its write: the re-read counts (with a
		// cache, the one after the 412).
		store.external("foreign2")
		if _, err := w.Submit(ctx, set("after", 1)); err != nil {
			t.Fatal(err)
		}
		if n := peek(); n != first+2 {
			t.Errorf("ttl %v: a change by someone else, seen through a 412: %d", ttl, n)
		}
		if err := w.Do(ctx, func(context.Context, Store[model]) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if n := peek(); n != first+3 {
			t.Errorf("ttl %v: the read after an action (unknown to the writer) is not counted: %d", ttl, n)
		}
	}
}

// TestExternalChangesIgnoresReadsDuringOwnWrite: a read answered while the writer's own write
// is in flight (Azure renews a resource's ETag when it accepts a long-running PUT, and again
// when it completes) is not someone else's change.
func TestExternalChangesIgnoresReadsDuringOwnWrite(t *testing.T) {
	ctx := context.Background()
	store := &midWriteStore{fakeStore: &fakeStore{obj: &model{}, etag: 1}, accepted: make(chan struct{}), complete: make(chan struct{})}
	w := New[model](store, Options[model]{CacheTTL: time.Hour})
	if _, err := w.Peek(ctx); err != nil {
		t.Fatal(err)
	}
	base := w.ExternalChanges()
	store.slow = true
	done := make(chan error)
	go func() { _, err := w.Submit(ctx, set("a", 1)); done <- err }()
	<-store.accepted
	w.Invalidate()
	if _, err := w.Peek(ctx); err != nil { // sees the half-done write's ETag
		t.Fatal(err)
	}
	close(store.complete)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	w.Invalidate()
	if _, err := w.Peek(ctx); err != nil {
		t.Fatal(err)
	}
	if n := w.ExternalChanges(); n != base {
		t.Fatalf("own long-running write counted as %d external changes", n-base)
	}
}

// midWriteStore's Put, when slow, renews the ETag on acceptance and waits for complete.
type midWriteStore struct {
	*fakeStore
	slow               bool
	accepted, complete chan struct{}
}

func (s *midWriteStore) Put(ctx context.Context, obj *model, etag string) (*model, string, error) {
	if !s.slow {
		return s.fakeStore.Put(ctx, obj, etag)
	}
	s.mu.Lock()
	if s.obj != nil && etag != strconv.Itoa(s.etag) {
		s.mu.Unlock()
		return nil, "", ErrPreconditionFailed
	}
	s.etag++ // accepted: provisioning
	s.mu.Unlock()
	close(s.accepted)
	<-s.complete
	s.mu.Lock()
	s.obj = jsonClone(obj)
	s.etag++ // completed
	e := strconv.Itoa(s.etag)
	s.mu.Unlock()
	return jsonClone(obj), e, nil
}
