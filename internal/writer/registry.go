package writer

import (
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
		r.writers[key] = w
	}
	return w
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
