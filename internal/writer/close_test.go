package writer

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/azure-ccm/azure-ccm/internal/testutil"
)

// putGateStore holds every Put until release closes, after telling entered.
type putGateStore struct {
	*fakeStore
	entered chan struct{}
	release chan struct{}
}

func (s *putGateStore) Put(ctx context.Context, obj *model, etag string) (*model, string, error) {
	s.entered <- struct{}{}
	<-s.release
	return s.fakeStore.Put(ctx, obj, etag)
}

// TestCloseWaitsForTheBatchInFlight: Close refuses new changes and the queued ones (none of
// them is written) and returns only once the batch already writing has finished; a Close whose
// context ends first says so.
func TestCloseWaitsForTheBatchInFlight(t *testing.T) {
	st := &putGateStore{fakeStore: &fakeStore{}, entered: make(chan struct{}, 1), release: make(chan struct{})}
	w := New[model](st, Options[model]{})
	ctx := context.Background()
	first := make(chan error, 1)
	go func() {
		_, err := w.Submit(ctx, set("a", 1))
		first <- err
	}()
	<-st.entered // the first batch is writing
	queued := make(chan error, 1)
	go func() {
		_, err := w.Submit(ctx, set("b", 1))
		queued <- err
	}()
	testutil.Eventually(t, "the second change queued behind the write", func() error {
		if n := w.Pending(); n != 1 {
			return fmt.Errorf("%d pending", n)
		}
		return nil
	})

	ended, cancel := context.WithCancel(ctx)
	cancel()
	if err := w.Close(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close with a write in flight and its context ended = %v, want context.Canceled", err)
	}
	if err := <-queued; !errors.Is(err, ErrClosed) {
		t.Errorf("queued change after Close: %v, want ErrClosed", err)
	}
	if _, err := w.Submit(ctx, set("c", 1)); !errors.Is(err, ErrClosed) {
		t.Errorf("Submit after Close: %v, want ErrClosed", err)
	}
	if err := w.Do(ctx, func(context.Context, Store[model]) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("Do after Close: %v, want ErrClosed", err)
	}

	close(st.release)
	if err := <-first; err != nil {
		t.Errorf("the batch in flight: %v", err)
	}
	if err := w.Close(ctx); err != nil {
		t.Errorf("Close once the write finished: %v", err)
	}
	m, puts, _ := st.snapshot()
	if puts != 1 || len(m.Items) != 1 || m.Items["a"] != 1 {
		t.Errorf("stored %v after %d puts; want only the first change, in one put", m.Items, puts)
	}
	if got, err := w.Get(ctx); err != nil || got == nil || got.Items["a"] != 1 {
		t.Errorf("Get after Close = %v, %v; reads still work", got, err)
	}
}
