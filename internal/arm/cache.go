package arm

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// ListCache caches the result of one LIST per key (a resource group, a scale set ...), with a
// TTL and explicit invalidation. Concurrent misses of a key share one LIST. An invalidation
// during a LIST makes that LIST's result unusable for later callers, so a writer that
// invalidates after its PUT never sees its own change undone by an older read.
type ListCache[T any] struct {
	name string
	ttl  time.Duration
	// minRefresh bounds how often Lookup re-lists a key to find an item it does not contain.
	minRefresh time.Duration
	list       func(ctx context.Context, key string) ([]T, error)
	now        func() time.Time
	metrics    *Metrics

	// version, when set, names an item and what of it others may change (ListCache.ExternalChanges).
	version func(T) (name, version string)

	mu      sync.Mutex
	entries map[string]listEntry[T]
	gens    map[string]uint64
	// external counts, per key, the LISTs that found the items other than the cache had them
	// (see ExternalChanges).
	external map[string]uint64
	// writing counts, per key and item name, the caller's writes in flight (Writing).
	writing map[string]map[string]int
	group   singleflight.Group
}

type listEntry[T any] struct {
	items   []T
	fetched time.Time
}

// NewListCache creates a cache. A ttl <= 0 disables caching (every Get lists).
func NewListCache[T any](name string, ttl time.Duration, list func(ctx context.Context, key string) ([]T, error),
	now func() time.Time, m *Metrics) *ListCache[T] {
	if now == nil {
		now = time.Now
	}
	minRefresh := 5 * time.Second
	if ttl > 0 && ttl < minRefresh {
		minRefresh = ttl
	}
	return &ListCache[T]{name: name, ttl: ttl, minRefresh: minRefresh, list: list, now: now, metrics: m,
		entries: map[string]listEntry[T]{}, gens: map[string]uint64{}, external: map[string]uint64{},
		writing: map[string]map[string]int{}}
}

// Writing marks item name of key as being written by the caller until done is called, after
// the caller's Update or Invalidate: a LIST that finds the item half-written (a create in
// flight already shows in Azure's list) does not count as someone else's change.
func (c *ListCache[T]) Writing(key, name string) (done func()) {
	key, name = strings.ToLower(key), strings.ToLower(name)
	c.mu.Lock()
	if c.writing[key] == nil {
		c.writing[key] = map[string]int{}
	}
	c.writing[key][name]++
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.writing[key][name]--; c.writing[key][name] <= 0 {
				delete(c.writing[key], name)
			}
		})
	}
}

// ExternalChanges counts the LISTs of key that found items (named and versioned by the cache's
// version function) other than the cached list had them: created, changed or deleted by
// someone else since, as writers keep the cache in step with their own writes (Update). A LIST
// with no cached list to compare with counts too (after an invalidation nothing is known).
// Without a version function every LIST counts.
func (c *ListCache[T]) ExternalChanges(key string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.external[strings.ToLower(key)]
}

// sameItems compares two lists of key by the version function, leaving out the items being
// written. c.mu is held.
func (c *ListCache[T]) sameItems(key string, a, b []T) bool {
	if c.version == nil {
		return false
	}
	versions := func(items []T) map[string]string {
		m := make(map[string]string, len(items))
		for _, it := range items {
			if name, v := c.version(it); c.writing[key][name] == 0 {
				m[name] = v
			}
		}
		return m
	}
	return maps.Equal(versions(a), versions(b))
}

// Get returns the items of key, listing them when missing or older than the TTL.
func (c *ListCache[T]) Get(ctx context.Context, key string) ([]T, error) {
	items, _, err := c.get(ctx, strings.ToLower(key), 0)
	return items, err
}

// Lookup returns the first item of key for which match is true. When none matches and the
// cached list is older than a few seconds, it lists once more: a VM created after the last
// LIST is found without waiting for the TTL, while a burst of lookups for a missing item
// still costs at most one LIST per interval.
func (c *ListCache[T]) Lookup(ctx context.Context, key string, match func(T) bool) (T, bool, error) {
	key = strings.ToLower(key)
	items, fetched, err := c.get(ctx, key, 0)
	var zero T
	if err != nil {
		return zero, false, err
	}
	for _, it := range items {
		if match(it) {
			return it, true, nil
		}
	}
	if c.now().Sub(fetched) < c.minRefresh {
		return zero, false, nil
	}
	items, _, err = c.get(ctx, key, c.minRefresh)
	if err != nil {
		return zero, false, err
	}
	for _, it := range items {
		if match(it) {
			return it, true, nil
		}
	}
	return zero, false, nil
}

// Refresh returns the items of key listed again, unless the cached list is only a few seconds
// old: for a caller that did not find what it needs (a user's resource created after the LIST),
// at most one LIST per interval however many ask.
func (c *ListCache[T]) Refresh(ctx context.Context, key string) ([]T, error) {
	items, _, err := c.get(ctx, strings.ToLower(key), c.minRefresh)
	return items, err
}

// get returns cached items younger than maxAge (0: the TTL).
func (c *ListCache[T]) get(ctx context.Context, key string, maxAge time.Duration) ([]T, time.Time, error) {
	if maxAge <= 0 {
		maxAge = c.ttl
	}
	c.mu.Lock()
	e, ok := c.entries[key]
	gen := c.gens[key]
	c.mu.Unlock()
	if ok && c.ttl > 0 && c.now().Sub(e.fetched) < maxAge {
		return e.items, e.fetched, nil
	}
	reason := "miss"
	if ok {
		reason = "expired"
	}
	v, err, _ := c.group.Do(key+"#"+strconv.FormatUint(gen, 10), func() (any, error) {
		c.metrics.observeCacheRefresh(c.name, reason)
		started := c.now()
		items, err := c.list(ctx, key)
		if err != nil {
			return nil, err
		}
		e := listEntry[T]{items: items, fetched: started}
		c.mu.Lock()
		if c.gens[key] == gen {
			if prev, had := c.entries[key]; !had || !c.sameItems(key, prev.items, items) {
				c.external[key]++
			}
			c.entries[key] = e
		}
		c.mu.Unlock()
		return e, nil
	})
	if err != nil {
		return nil, time.Time{}, err
	}
	e = v.(listEntry[T])
	return e.items, e.fetched, nil
}

// Invalidate drops key; the next Get lists again.
func (c *ListCache[T]) Invalidate(key string) {
	key = strings.ToLower(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, key)
	c.gens[key]++
}

// Update edits key's cached items in place with fn (a writer that knows what it wrote keeps the
// list warm instead of dropping it: a burst of public IP creations would otherwise re-list the
// resource group once per IP). Without a cached list it only invalidates. A LIST in flight may
// predate the write, so its result is discarded, as on Invalidate.
func (c *ListCache[T]) Update(key string, fn func(items []T) []T) {
	key = strings.ToLower(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gens[key]++
	e, ok := c.entries[key]
	if !ok {
		return
	}
	e.items = fn(slices.Clone(e.items))
	c.entries[key] = e
}

// InvalidateAll drops every key.
func (c *ListCache[T]) InvalidateAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.entries {
		c.gens[k]++
	}
	for k := range c.gens {
		c.gens[k]++
	}
	c.entries = map[string]listEntry[T]{}
}
