package writer

import (
	"context"
	"strings"
	"sync"
)

// Registry hands out the single Writer of each resource, keyed by its Azure resource ID (compared
// case-insensitively, as ARM does), so every controller touching a resource shares one writer.
type Registry[T any] struct {
	newStore func(id string) Store[T]
	opts     Options[T]

	mu      sync.Mutex
	writers map[string]*Writer[T]
	// closed: writers made from now on refuse changes too (Close).
	closed bool
}

// NewRegistry returns a registry creating stores with newStore.
func NewRegistry[T any](newStore func(id string) Store[T], opts Options[T]) *Registry[T] {
	return &Registry[T]{newStore: newStore, opts: opts, writers: map[string]*Writer[T]{}}
}

// For returns the writer of the resource id, creating it on first use.
func (r *Registry[T]) For(id string) *Writer[T] {
	key := strings.ToLower(id)
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.writers[key]
	if !ok {
		w = New(r.newStore(id), r.opts)
		w.closed = r.closed
		r.writers[key] = w
	}
	return w
}

// Close closes every writer of the registry, and those it hands out later (Writer.Close): no
// change is accepted any more, and it returns once the batches in flight have finished, or with
// ctx's error when ctx ends first.
func (r *Registry[T]) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	ws := make([]*Writer[T], 0, len(r.writers))
	for _, w := range r.writers {
		ws = append(ws, w)
	}
	r.mu.Unlock()
	// Every writer refuses changes before the first wait, so that none starts a batch while
	// another's is awaited.
	for _, w := range ws {
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
	}
	for _, w := range ws {
		if err := w.Close(ctx); err != nil {
			return err
		}
	}
	return nil
}

// InvalidateAll drops every writer's cache (for example after losing and regaining leadership).
func (r *Registry[T]) InvalidateAll() {
	r.mu.Lock()
	ws := make([]*Writer[T], 0, len(r.writers))
	for _, w := range r.writers {
		ws = append(ws, w)
	}
	r.mu.Unlock()
	for _, w := range ws {
		w.Invalidate()
	}
}
