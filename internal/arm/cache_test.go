package arm

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestListCacheTTLInvalidateAndLookup(t *testing.T) {
	clk := &clock{t: time.Unix(0, 0)}
	calls := map[string]int{}
	data := map[string][]string{"rg": {"a", "b"}}
	var fail error
	c := NewListCache("test", time.Minute, func(_ context.Context, key string) ([]string, error) {
		calls[key]++
		if fail != nil {
			return nil, fail
		}
		return append([]string(nil), data[key]...), nil
	}, clk.now, NewMetrics())
	ctx := context.Background()

	for i := 0; i < 3; i++ {
		if got, err := c.Get(ctx, "RG"); err != nil || len(got) != 2 {
			t.Fatalf("get: %v %v", got, err)
		}
	}
	if calls["rg"] != 1 {
		t.Fatalf("lists = %d, want 1 (keys are case-insensitive, cached)", calls["rg"])
	}
	clk.add(61 * time.Second)
	_, _ = c.Get(ctx, "rg")
	if calls["rg"] != 2 {
		t.Fatalf("expired entry not refreshed: %d", calls["rg"])
	}
	data["rg"] = append(data["rg"], "c")
	c.Invalidate("rg")
	got, _ := c.Get(ctx, "rg")
	if calls["rg"] != 3 || len(got) != 3 {
		t.Fatalf("invalidate: calls=%d got=%v", calls["rg"], got)
	}

	// Lookup of a missing item re-lists at most once per minRefresh.
	match := func(name string) func(string) bool { return func(s string) bool { return s == name } }
	if _, ok, _ := c.Lookup(ctx, "rg", match("zz")); ok {
		t.Fatal("found missing item")
	}
	if calls["rg"] != 3 {
		t.Fatalf("fresh list must not be re-read: %d", calls["rg"])
	}
	clk.add(6 * time.Second)
	data["rg"] = append(data["rg"], "zz")
	if _, ok, _ := c.Lookup(ctx, "rg", match("zz")); !ok || calls["rg"] != 4 {
		t.Fatalf("new item not found by a refresh: calls=%d", calls["rg"])
	}
	if _, ok, _ := c.Lookup(ctx, "rg", match("a")); !ok || calls["rg"] != 4 {
		t.Fatalf("present item must come from cache: calls=%d", calls["rg"])
	}

	// Errors are returned and not cached.
	c.InvalidateAll()
	fail = errors.New("boom")
	if _, err := c.Get(ctx, "rg"); err == nil {
		t.Fatal("want error")
	}
	fail = nil
	if got, err := c.Get(ctx, "rg"); err != nil || len(got) != 4 {
		t.Fatalf("after error: %v %v", got, err)
	}
}

func TestListCacheInvalidateDuringList(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	version := 1
	c := NewListCache("test", time.Hour, func(_ context.Context, _ string) ([]int, error) {
		v := version
		if v == 1 {
			close(started)
			<-release
		}
		return []int{v}, nil
	}, nil, nil)
	done := make(chan []int)
	go func() {
		got, _ := c.Get(context.Background(), "k")
		done <- got
	}()
	<-started
	// A writer changes the resource and invalidates while the old LIST is in flight.
	version = 2
	c.Invalidate("k")
	close(release)
	if got := <-done; got[0] != 1 {
		t.Fatalf("in-flight caller got %v", got)
	}
	got, _ := c.Get(context.Background(), "k")
	if got[0] != 2 {
		t.Fatalf("stale list stored after invalidation: %v", got)
	}
}

func TestListCacheDisabled(t *testing.T) {
	n := 0
	c := NewListCache("test", 0, func(context.Context, string) ([]int, error) { n++; return []int{n}, nil }, nil, nil)
	_, _ = c.Get(context.Background(), "k")
	_, _ = c.Get(context.Background(), "k")
	if n != 2 {
		t.Fatalf("ttl 0 must not cache: %d lists", n)
	}
}

func TestListCacheUpdateKeepsListWarm(t *testing.T) {
	clk := &clock{t: time.Unix(0, 0)}
	lists := 0
	c := NewListCache("test", time.Minute, func(_ context.Context, key string) ([]string, error) {
		lists++
		return []string{"a", "b"}, nil
	}, clk.now, NewMetrics())
	ctx := context.Background()
	// Without a cached list, Update only invalidates (nothing to edit).
	c.Update("rg", func(items []string) []string { return append(items, "x") })
	before, _ := c.Get(ctx, "rg")
	c.Update("RG", func(items []string) []string { return append(items[1:], "c") })
	got, _ := c.Get(ctx, "rg")
	if lists != 1 || len(got) != 2 || got[0] != "b" || got[1] != "c" {
		t.Fatalf("after update: lists=%d items=%v", lists, got)
	}
	if len(before) != 2 || before[0] != "a" {
		t.Fatalf("update changed a list already handed out: %v", before)
	}
	// The TTL still counts from the LIST.
	clk.add(61 * time.Second)
	if got, _ := c.Get(ctx, "rg"); lists != 2 || len(got) != 2 || got[0] != "a" {
		t.Fatalf("expired: lists=%d items=%v", lists, got)
	}
}

func TestListCacheRefreshAtMostEveryFewSeconds(t *testing.T) {
	clk := &clock{t: time.Unix(0, 0)}
	lists := 0
	c := NewListCache("test", time.Hour, func(_ context.Context, key string) ([]string, error) {
		lists++
		return []string{"a"}, nil
	}, clk.now, NewMetrics())
	ctx := context.Background()
	_, _ = c.Get(ctx, "rg")
	_, _ = c.Refresh(ctx, "rg") // the list is brand new: no LIST
	if lists != 1 {
		t.Fatalf("lists = %d, want 1", lists)
	}
	clk.add(6 * time.Second)
	_, _ = c.Refresh(ctx, "rg")
	_, _ = c.Refresh(ctx, "rg")
	if lists != 2 {
		t.Fatalf("lists = %d, want 2 (one refresh per interval)", lists)
	}
}

// TestListCacheExternalChanges: a LIST that finds what the cache (kept in step with the
// caller's own writes by Update) already had is not counted; one that finds an item added,
// changed or removed by someone else is, and so is one with nothing to compare with.
func TestListCacheExternalChanges(t *testing.T) {
	clk := &clock{t: time.Unix(0, 0)}
	azure := []string{"a=1", "b=1"}
	c := NewListCache("test", time.Minute, func(_ context.Context, key string) ([]string, error) {
		return append([]string(nil), azure...), nil
	}, clk.now, NewMetrics())
	c.version = func(s string) (string, string) { name, v, _ := strings.Cut(s, "="); return name, v }
	ctx := context.Background()
	refresh := func() uint64 {
		t.Helper()
		clk.add(time.Hour)
		if _, err := c.Refresh(ctx, "rg"); err != nil {
			t.Fatal(err)
		}
		return c.ExternalChanges("RG")
	}
	if n := refresh(); n != 1 {
		t.Fatalf("first LIST: %d", n)
	}
	if n := refresh(); n != 1 {
		t.Fatalf("nothing changed: %d", n)
	}
	// The caller's own write, kept in the cache.
	azure = append(azure, "c=1")
	c.Update("rg", func(items []string) []string { return append(items, "c=1") })
	if n := refresh(); n != 1 {
		t.Fatalf("own write: %d", n)
	}
	// A create in flight shows in the LIST before the caller's Update: not counted.
	done := c.Writing("rg", "E")
	azure = append(azure, "e=1")
	if n := refresh(); n != 1 {
		t.Fatalf("own write in flight: %d", n)
	}
	c.Update("rg", func(items []string) []string { return append(items, "e=1") })
	done()
	if n := refresh(); n != 1 {
		t.Fatalf("own write done: %d", n)
	}
	for i, edit := range []func(){
		func() { azure[0] = "a=2" },             // changed
		func() { azure = append(azure, "d=1") }, // added
		func() { azure = azure[1:] },            // removed
		func() { c.Invalidate("rg") },           // nothing to compare with
	} {
		edit()
		if n := refresh(); n != uint64(2+i) {
			t.Fatalf("edit %d: %d", i, n)
		}
	}
	// Without a version function every LIST counts.
	plain := NewListCache("plain", time.Minute, func(context.Context, string) ([]string, error) { return []string{"a"}, nil }, clk.now, NewMetrics())
	for i := range 2 {
		clk.add(time.Hour)
		_, _ = plain.Get(ctx, "rg")
		if n := plain.ExternalChanges("rg"); n != uint64(i+1) {
			t.Fatalf("without a version function: %d", n)
		}
	}
}
