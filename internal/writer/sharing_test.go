package writer

import (
	"context"
	"testing"
	"time"
)

// A write's answer and a read's answer are cached and handed out as the store returned them,
// without copies (a copy of a large load balancer costs milliseconds and megabytes); Get still
// gives a private copy, and a batch never edits the model its callers hold.
func TestStoreAnswersSharedNotCopied(t *testing.T) {
	ctx := context.Background()
	store := &fakeStore{}
	w := New[model](store, Options[model]{CacheTTL: time.Minute})

	stored, err := w.Submit(ctx, set("a", 1))
	if err != nil {
		t.Fatal(err)
	}
	peeked, err := w.Peek(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if peeked != stored {
		t.Error("Peek after a write returned a copy of the write's answer, want the cached answer itself")
	}
	got, err := w.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got == stored {
		t.Error("Get returned the shared model, want a private copy")
	}

	// The next batch works on its own copy: the model handed out before stays as it was.
	next, err := w.Submit(ctx, set("b", 2))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := stored.Items["b"]; ok || next == stored {
		t.Errorf("a later batch changed the model handed out before: %v", stored.Items)
	}

	// A read's answer is cached as it is too.
	w.Invalidate()
	read, err := w.Peek(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := w.Peek(ctx); again != read {
		t.Error("Peek from the cache returned another model than the read it cached")
	}
}
