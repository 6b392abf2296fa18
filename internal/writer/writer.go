// Package writer is a group-commit writer for one Azure resource. Every change to the resource
// (from any controller) is a Mutation submitted to the resource's Writer. The writer batches all
// pending mutations into one read-modify-write: read (from its cache while fresh), apply every
// mutation in order, PUT once with If-Match, on 412 re-read and re-apply, then report each
// mutation's own result. N concurrent changes cost one PUT, and no writer overwrites another.
package writer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
)

// Store reads and writes one resource. Implementations wrap an ARM client (LB, NSG, PIP, backend
// pool …) or a fake in tests. The models Get and Put return become the writer's: it caches them
// and hands them to readers without a copy (a 5,000-address load balancer takes milliseconds and
// megabytes to copy), so a store must not keep or modify them.
type Store[T any] interface {
	// Get returns the resource and its ETag, or (nil, "", nil) when it does not exist.
	Get(ctx context.Context) (*T, string, error)
	// Put writes obj conditionally on etag (If-Match; "" means the resource is being created)
	// and returns the stored resource and its new ETag.
	Put(ctx context.Context, obj *T, etag string) (*T, string, error)
	// Delete removes the resource conditionally on etag.
	Delete(ctx context.Context, etag string) error
}

// ChildStore is a Store whose resource has children that Azure also writes on their own (the
// backend pools of a load balancer). A batch whose mutations all said they change one child
// (SubmitChild), and that changed nothing else, is written with the child's own API: a smaller
// request that cannot disturb the rest of the resource. The resource stays one writer's: the
// child API carries the resource's ETag in If-Match, as a whole PUT does.
type ChildStore[T any] interface {
	Store[T]
	// OnlyChildChanged reports whether work differs from cur in the named child alone, and that
	// child exists in both.
	OnlyChildChanged(cur, work *T, child string) bool
	// PutChild writes work's named child conditionally on etag and returns work as Azure now has
	// it (its child replaced by Azure's answer).
	PutChild(ctx context.Context, work *T, child, etag string) (*T, error)
}

// Mutation changes the resource model. cur is a private copy (nil when the resource does not
// exist); the mutation may edit it in place and return it, return a new value, or return nil to
// ask for the resource to be deleted. A mutation that returns an error is rolled back and fails
// alone. Mutations may run more than once (after a 412), so they must be functions of their input.
type Mutation[T any] func(cur *T) (*T, error)

// ErrPreconditionFailed can be returned by a Store to signal an ETag mismatch.
var ErrPreconditionFailed = errors.New("precondition failed (etag mismatch)")

// ErrClosed answers a change given to a writer after Close (its provider generation was
// replaced by a reload): nothing of it was written, and the caller's next attempt goes through
// the new generation's writer.
var ErrClosed = errors.New("writer closed: its cloud provider generation was replaced")

// Options tune a Writer; zero values give the defaults.
type Options[T any] struct {
	// Clone deep-copies a model; default: DeepCopy.
	Clone func(*T) *T
	// Equal decides whether a batch changed anything; default: DeepEqual (the SDK's models
	// hold only data, so equal values encode equally). Equal batches write nothing, so
	// steady-state reconciles cost no ARM write.
	Equal func(a, b *T) bool
	// CacheTTL is how long the last read or written model is reused without a GET. 0 disables the
	// cache. A stale cache is harmless (the PUT fails with 412 and the batch is re-read) but costs
	// a round trip.
	CacheTTL time.Duration
	// MaxAttempts bounds read-apply-write rounds of one batch on 412 (default 5).
	MaxAttempts int
	// IsPreconditionFailed recognises an ETag mismatch; default: ErrPreconditionFailed or an
	// azcore.ResponseError with status 412.
	IsPreconditionFailed func(error) bool
	// Timeout bounds one batch's ARM calls (default 5 minutes). Batches do not inherit a caller's
	// context because they serve many callers.
	Timeout time.Duration
	// Now is the clock (tests).
	Now func() time.Time
	// MaxBatch caps the mutations of one batch; 0 means no cap. 1 turns group commit off (one
	// read-modify-write per mutation): only the benchmark's no-merging baseline uses it.
	MaxBatch int
	// Gather is how long a batch waits for more mutations before it is taken, when its read came
	// from the cache (an ARM read is a window of its own). Concurrent reconciles that reach the
	// writer a few milliseconds apart — e.g. every service of the previous load balancer batch,
	// moving on to the NSG together — then share one write instead of two. 0: no wait.
	Gather time.Duration
}

type result[T any] struct {
	obj *T
	err error
}

type request[T any] struct {
	ctx context.Context
	m   Mutation[T]
	// action, when set, is an operation run alone in the writer's turn (Do); m is then nil.
	action Action[T]
	// between marks an action that needs only to fall between two writes (DoBetween): the
	// mutations queued after it may be written first.
	between bool
	// child names the one child m changes (SubmitChild); "" for any change.
	child string
	done  chan result[T]
}

// Writer serialises all changes to one resource through group commit.
type Writer[T any] struct {
	store Store[T]
	opts  Options[T]

	mu      sync.Mutex
	pending []*request[T]
	running bool
	// idle is closed when the running batch loop ends (nil while none runs): Close waits on it.
	idle chan struct{}
	// closed refuses new changes (Close).
	closed    bool
	cached    bool
	cache     *T
	cacheETag string
	cacheAt   time.Time
	// gen counts changes of the cache (remembered or dropped): a read caches its result only if
	// nothing changed while it was in flight, so a slow response never replaces a newer model.
	gen uint64
	// reading is the read in flight, which readers arriving while the cache has not changed
	// since it started share (readShared).
	reading *readCall[T]
	stats   Stats
	// known is the resource's ETag as this writer last saw it ("" for absent): the answer to
	// its own write, or a read it based its work on. external counts the reads that found
	// another one: someone else changed the resource in between (or this writer cannot tell:
	// after an action or a child write, whose ETag it does not learn, or before its first read).
	known    string
	knownSet bool
	external uint64
	// writing is set while this writer's own write is in flight: a read meanwhile may see the
	// write half done (an ETag renewed when the operation is accepted, and again when it
	// completes) and says nothing about others.
	writing bool
}

// Stats counts a writer's ARM traffic (for tests and metrics).
type Stats struct {
	Batches, Gets, Puts, ChildPuts, Deletes, Conflicts int
}

// New returns a writer for the resource behind store.
func New[T any](store Store[T], opts Options[T]) *Writer[T] {
	if opts.Clone == nil {
		opts.Clone = DeepCopy[T]
	}
	if opts.Equal == nil {
		opts.Equal = DeepEqual[T]
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 5
	}
	if opts.IsPreconditionFailed == nil {
		opts.IsPreconditionFailed = IsPreconditionFailed
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Writer[T]{store: store, opts: opts}
}

// IsPreconditionFailed reports whether err is an ETag mismatch.
func IsPreconditionFailed(err error) bool {
	if errors.Is(err, ErrPreconditionFailed) {
		return true
	}
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusPreconditionFailed
}

// Submit queues m and blocks until the batch holding it is committed. It returns the resource as
// stored after that batch (shared with the batch's other callers and the writer's cache: read
// it, do not modify it; nil if the resource was deleted or does not exist) and m's own error, or
// the write's error.
func (w *Writer[T]) Submit(ctx context.Context, m Mutation[T]) (*T, error) {
	return w.submit(ctx, "", m)
}

// SubmitChild is Submit for a mutation that changes only the named child of the resource (a
// backend pool of a load balancer). When every mutation of its batch changed that child alone,
// the batch is written with the child's API (see ChildStore); otherwise, or when the store has
// no child API, it is one whole write like any other.
func (w *Writer[T]) SubmitChild(ctx context.Context, child string, m Mutation[T]) (*T, error) {
	return w.submit(ctx, child, m)
}

func (w *Writer[T]) submit(ctx context.Context, child string, m Mutation[T]) (*T, error) {
	r := &request[T]{ctx: ctx, m: m, child: child, done: make(chan result[T], 1)}
	if !w.enqueue(r) {
		return nil, ErrClosed
	}
	select {
	case res := <-r.done:
		return res.obj, res.err
	case <-ctx.Done():
		// The mutation may still be applied if its batch was already taken; the caller re-reconciles.
		return nil, ctx.Err()
	}
}

// enqueue queues r and starts the batch loop if none runs; false once the writer is closed.
func (w *Writer[T]) enqueue(r *request[T]) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	w.pending = append(w.pending, r)
	if !w.running {
		w.running = true
		w.idle = make(chan struct{})
		go w.run()
	}
	return true
}

// Close makes the writer refuse every new change with ErrClosed, answers the queued changes no
// batch has taken yet with ErrClosed (none of them is written), and waits until the batch or
// action in flight has finished, or ctx ends (its error is returned then). A write already sent
// to ARM cannot be called back; waiting for it is what keeps it from landing after a write of
// the writer that replaces this one. Reads (Get, Peek) still work.
func (w *Writer[T]) Close(ctx context.Context) error {
	w.mu.Lock()
	w.closed = true
	queued := w.pending
	w.pending = nil
	idle := w.idle
	w.mu.Unlock()
	for _, r := range queued {
		r.done <- result[T]{err: ErrClosed}
	}
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Action is an operation on the resource other than a write of its model: an ARM action such
// as a load balancer's migrateToIpBased, which changes the resource on Azure's side. It gets the
// writer's store (the implementation decides whether it can do the action).
type Action[T any] func(ctx context.Context, store Store[T]) error

// Do runs a in the writer's turn: after the mutations queued before it have been written and
// before those queued after it, never batched with any. The cached model is dropped afterwards
// (the action changed the resource), so the next batch reads it again.
func (w *Writer[T]) Do(ctx context.Context, a Action[T]) error {
	return w.do(ctx, a, false)
}

// DoBetween runs a between two of the writer's writes, never during one, like Do; but the
// mutations queued after it may join the batch being taken, so it runs after that batch. For an
// action whose only rule is not to overlap a write (writes to other resources that change this
// one on Azure's side): a burst of them, one per caller, would otherwise split the writer's
// batches into one write per action. It waits at most one batch longer than Do would.
func (w *Writer[T]) DoBetween(ctx context.Context, a Action[T]) error {
	return w.do(ctx, a, true)
}

func (w *Writer[T]) do(ctx context.Context, a Action[T], between bool) error {
	r := &request[T]{ctx: ctx, action: a, between: between, done: make(chan result[T], 1)}
	if !w.enqueue(r) {
		return ErrClosed
	}
	select {
	case res := <-r.done:
		return res.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// runAction runs one action request with the writer's timeout, bounded by its caller's context
// too (an action serves one caller, unlike a batch).
func (w *Writer[T]) runAction(r *request[T]) {
	if err := r.ctx.Err(); err != nil {
		r.done <- result[T]{err: err}
		return
	}
	ctx, cancel := context.WithTimeout(r.ctx, w.opts.Timeout)
	defer cancel()
	err := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("action panicked: %v", p)
			}
		}()
		return r.action(ctx, w.store)
	}()
	w.mu.Lock()
	w.dropLocked()
	// An action reads and writes the store directly: what it saw and did is not known here.
	w.knownSet = false
	w.mu.Unlock()
	r.done <- result[T]{err: err}
}

// Get returns the resource as the writer knows it (from its cache while fresh, else read), as a
// private copy; nil when it does not exist.
func (w *Writer[T]) Get(ctx context.Context) (*T, error) {
	obj, _, _, err := w.read(ctx)
	return obj, err
}

// Peek is Get without the copy, for callers that only look: the model may be shared with the
// writer's cache and with other callers, so it must not be modified. Copying a load balancer
// whose pools hold thousands of addresses costs milliseconds and megabytes, and most reads of
// a reconcile only look for a frontend or a pool.
func (w *Writer[T]) Peek(ctx context.Context) (*T, error) {
	obj, _, _, err := w.readShared(ctx, true)
	return obj, err
}

// PeekETag is Peek with the model's ETag ("" when the resource does not exist).
func (w *Writer[T]) PeekETag(ctx context.Context) (*T, string, error) {
	obj, etag, _, err := w.readShared(ctx, true)
	return obj, etag, err
}

// CachedETag returns the ETag of the cached model while the cache is fresh ("" and true when the
// resource is known not to exist), without copying the model: callers use it to tell that
// nothing changed since they last looked.
func (w *Writer[T]) CachedETag() (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cached && w.opts.CacheTTL > 0 && w.opts.Now().Sub(w.cacheAt) < w.opts.CacheTTL {
		return w.cacheETag, true
	}
	return "", false
}

// Seed caches what a read other than the writer's own just returned — a LIST of the resource
// group holding the resource with its ETag, or not holding it (nil, "") — so the next batch
// needs no GET. A fresh model the writer already caches is kept: it is as new or newer. A stale
// seed costs what a stale cache costs: the conditional write fails with 412 (If-Match, or
// If-None-Match for a create) and the batch reads the resource.
func (w *Writer[T]) Seed(obj *T, etag string) {
	if w.opts.CacheTTL <= 0 || (obj != nil && etag == "") {
		return // without an ETag a write could not tell that the seed was stale
	}
	c := w.opts.Clone(obj)
	w.mu.Lock()
	if !w.cached || w.opts.Now().Sub(w.cacheAt) >= w.opts.CacheTTL {
		w.cached, w.cache, w.cacheETag, w.cacheAt = true, c, etag, w.opts.Now()
		w.gen++
		// The next write may be based on this model.
		w.observeLocked(etag)
	}
	w.mu.Unlock()
}

// Invalidate drops the cached model so the next batch reads the resource again.
func (w *Writer[T]) Invalidate() {
	w.mu.Lock()
	w.dropLocked()
	w.mu.Unlock()
}

func (w *Writer[T]) dropLocked() {
	w.cached, w.cache = false, nil
	w.gen++
}

// InvalidateOlderThan drops the cached model if it was read or written more than age ago, so
// that a caller that wants Azure's current state gets it without re-reading for every call.
func (w *Writer[T]) InvalidateOlderThan(age time.Duration) {
	w.mu.Lock()
	if w.cached && w.opts.Now().Sub(w.cacheAt) > age {
		w.dropLocked()
	}
	w.mu.Unlock()
}

// Pending is the number of queued, not yet batched mutations.
func (w *Writer[T]) Pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending)
}

// Stats returns the writer's counters.
func (w *Writer[T]) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

func (w *Writer[T]) run() {
	for {
		w.mu.Lock()
		if len(w.pending) == 0 {
			w.running = false
			close(w.idle)
			w.idle = nil
			w.mu.Unlock()
			return
		}
		if r := w.pending[0]; r.action != nil {
			w.pending = w.pending[1:]
			w.mu.Unlock()
			w.runAction(r)
			continue
		}
		w.stats.Batches++
		w.mu.Unlock()
		w.commit()
	}
}

// drain takes the queued mutations (up to MaxBatch together with the have already taken),
// answering those whose caller already gave up. It stops at an action queued with Do; actions
// queued with DoBetween stay queued, in their order, ahead of what the batch leaves, so they run
// right after it.
func (w *Writer[T]) drain(have int) []*request[T] {
	w.mu.Lock()
	room := len(w.pending)
	if w.opts.MaxBatch > 0 {
		room = max(w.opts.MaxBatch-have, 0)
	}
	var batch, left, waiting []*request[T]
	for i, r := range w.pending {
		if r.action != nil && !r.between {
			left = append(left, w.pending[i:]...)
			break
		}
		if r.action != nil {
			waiting = append(waiting, r)
			continue
		}
		if len(batch) == room {
			left = append(left, w.pending[i:]...)
			break
		}
		batch = append(batch, r)
	}
	w.pending = nil
	if rest := append(waiting, left...); len(rest) > 0 {
		w.pending = rest
	}
	w.mu.Unlock()
	live := batch[:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.done <- result[T]{err: err}
			continue
		}
		live = append(live, r)
	}
	return live
}

// commit runs one batch. The read happens before the batch is taken, so every mutation submitted
// while the read is in flight joins this batch: the read latency is the batching window.
func (w *Writer[T]) commit() {
	ctx, cancel := context.WithTimeout(context.Background(), w.opts.Timeout)
	defer cancel()

	var batch []*request[T]
	for attempt := 1; ; attempt++ {
		cur, etag, fromCache, err := w.readShared(ctx, false)
		if attempt == 1 && fromCache && err == nil && w.opts.Gather > 0 {
			time.Sleep(w.opts.Gather)
		}
		batch = append(batch, w.drain(len(batch))...)
		if err != nil {
			w.finish(batch, nil, nil, fmt.Errorf("read: %w", err))
			return
		}
		if len(batch) == 0 {
			return
		}
		work, errs := w.applyAll(cur, batch)

		stored, err := w.write(ctx, cur, work, etag, batchChild(batch, errs))
		if err != nil && w.opts.IsPreconditionFailed(err) && attempt < w.opts.MaxAttempts {
			continue // re-read and re-apply the whole batch (plus anything queued meanwhile)
		}
		w.finish(batch, errs, stored, err)
		return
	}
}

// applyAll applies the batch's mutations in order to a copy of cur and returns the result and
// each mutation's error. A failed mutation may have edited the model before failing; rather
// than copying the model before every mutation (a big load balancer takes milliseconds to copy,
// times the batch), the model is rebuilt from cur with the mutations that succeeded, which are
// functions of their input and so give the same result again.
func (w *Writer[T]) applyAll(cur *T, batch []*request[T]) (*T, []error) {
	errs := make([]error, len(batch))
	var ok []int
	work := w.opts.Clone(cur)
	for i, r := range batch {
		next, err := apply(r.m, work)
		if err == nil {
			ok, work = append(ok, i), next
			continue
		}
		errs[i] = err
		// Rebuild; a mutation that fails on the replay (it should not) is dropped too.
		for rebuilt := false; !rebuilt; {
			rebuilt, work = true, w.opts.Clone(cur)
			for k, j := range ok {
				next, err := apply(batch[j].m, work)
				if err != nil {
					errs[j] = err
					ok = append(ok[:k:k], ok[k+1:]...)
					rebuilt = false
					break
				}
				work = next
			}
		}
	}
	return work, errs
}

// apply runs one mutation, turning a panic into that mutation's error.
func apply[T any](m Mutation[T], cur *T) (next *T, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("mutation panicked: %v", p)
		}
	}()
	return m(cur)
}

// read returns a private copy of the resource, its ETag, and whether it came from the cache.
func (w *Writer[T]) read(ctx context.Context) (*T, string, bool, error) {
	obj, etag, fromCache, err := w.readShared(ctx, true)
	return w.opts.Clone(obj), etag, fromCache, err
}

// readShared is read without the copy, for commit, which never modifies cur (applyAll works on
// a copy of it). With join, a reader that finds no fresh cache shares the read in flight when
// nothing changed the cache since it started: hundreds of reconciles asking at once for a load
// balancer whose cache was just dropped each decoded their own copy of a 5,000-address
// document. A batch (commit) reads on its own: its read is the window that gathers the batch.
func (w *Writer[T]) readShared(ctx context.Context, join bool) (*T, string, bool, error) {
	for {
		w.mu.Lock()
		if w.cached && w.opts.CacheTTL > 0 && w.opts.Now().Sub(w.cacheAt) < w.opts.CacheTTL {
			// The cached model is never modified in place: it is only read (commit applies
			// mutations to a copy).
			cache, etag := w.cache, w.cacheETag
			w.mu.Unlock()
			return cache, etag, true, nil
		}
		c := w.reading
		if !join || c == nil || c.gen != w.gen {
			break // w.mu stays locked for the read below
		}
		c.joined++
		w.mu.Unlock()
		select {
		case <-c.done:
		case <-ctx.Done():
			return nil, "", false, ctx.Err()
		}
		// The read ended with its starter's context: this caller's may still be alive.
		if c.err != nil && (errors.Is(c.err, context.Canceled) || errors.Is(c.err, context.DeadlineExceeded)) && ctx.Err() == nil {
			continue
		}
		return c.obj, c.etag, false, c.err
	}
	w.stats.Gets++
	c := &readCall[T]{gen: w.gen, done: make(chan struct{})}
	w.reading = c
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		if w.reading == c {
			w.reading = nil
		}
		w.mu.Unlock()
		close(c.done)
	}()
	c.obj, c.etag, c.err = w.store.Get(ctx)
	if c.err != nil {
		w.mu.Lock()
		if w.gen == c.gen {
			w.dropLocked()
		}
		w.mu.Unlock()
		return nil, "", false, c.err
	}
	// Readers outside commit (Get, Peek) run concurrently with commit's writes: a response
	// that left Azure before a PUT can arrive after the PUT's result was remembered.
	w.rememberIf(c.obj, c.etag, c.gen)
	return c.obj, c.etag, false, nil
}

// readCall is a read of the store in flight; its result is shared by the readers that joined it.
type readCall[T any] struct {
	// gen is the writer's cache generation when the read started.
	gen  uint64
	done chan struct{}
	obj  *T
	etag string
	err  error
	// joined counts the readers that wait for this read (under the writer's lock; tests wait
	// for it).
	joined int
}

// ExternalChanges counts how often a read found the resource changed by someone other than
// this writer. Equal counts at two moments, with a read at the later one, mean that nothing
// but this writer changed the resource in between: every write of this writer is based on a
// model it read (and counted) or wrote itself, and conditional on that model's ETag.
func (w *Writer[T]) ExternalChanges() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.external
}

// observeLocked records the ETag a read or seed found.
func (w *Writer[T]) observeLocked(etag string) {
	if w.writing {
		return
	}
	if !w.knownSet || etag != w.known {
		w.external++
	}
	w.known, w.knownSet = etag, true
}

func (w *Writer[T]) remember(obj *T, etag string) {
	w.mu.Lock()
	if w.opts.CacheTTL > 0 {
		// obj is the store's answer, which nobody else holds: cached as it is.
		w.cached, w.cache, w.cacheETag, w.cacheAt = true, obj, etag, w.opts.Now()
	}
	w.gen++
	w.known, w.knownSet = etag, true
	w.mu.Unlock()
}

// rememberIf caches a read's result unless the cache changed since the read was sent.
func (w *Writer[T]) rememberIf(obj *T, etag string, gen uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gen != gen {
		// Overtaken by a write or an invalidation: an older state, not a change by someone
		// else (a change that came after it shows in the next read, or fails a write with 412).
		return
	}
	w.observeLocked(etag)
	if w.opts.CacheTTL > 0 {
		w.cached, w.cache, w.cacheETag, w.cacheAt = true, obj, etag, w.opts.Now()
		w.gen++
	}
}

// batchChild is the child every successful mutation of the batch changes alone ("" when they
// do not agree, or one of them may change anything).
func batchChild[T any](batch []*request[T], errs []error) string {
	child := ""
	for i, r := range batch {
		if errs != nil && errs[i] != nil {
			continue
		}
		if r.child == "" || (child != "" && !strings.EqualFold(child, r.child)) {
			return ""
		}
		child = r.child
	}
	return child
}

// write persists work if it differs from cur and returns the stored model. child, when set,
// is the one child the batch's mutations meant to change.
func (w *Writer[T]) write(ctx context.Context, cur, work *T, etag, child string) (*T, error) {
	switch {
	case (cur == nil && work == nil) || (cur != nil && work != nil && w.opts.Equal(cur, work)):
		return cur, nil
	case child != "" && cur != nil && work != nil:
		cs, ok := w.store.(ChildStore[T])
		if !ok || !cs.OnlyChildChanged(cur, work, child) {
			break
		}
		w.count(func(s *Stats) { s.ChildPuts++ })
		endOwnWrite := w.ownWrite()
		defer endOwnWrite() // ended after the cache is updated
		stored, err := cs.PutChild(ctx, work, child, etag)
		if err != nil {
			w.failed(err)
			return nil, fmt.Errorf("put %s: %w", child, err)
		}
		// The child API answers with the child alone: the resource's new ETag, and whatever
		// else changed with it, are not known, so the next batch reads the resource again.
		w.Invalidate()
		return stored, nil
	}
	switch {
	case work == nil:
		w.count(func(s *Stats) { s.Deletes++ })
		endOwnWrite := w.ownWrite()
		defer endOwnWrite()
		if err := w.store.Delete(ctx, etag); err != nil {
			w.failed(err)
			return nil, fmt.Errorf("delete: %w", err)
		}
		w.remember(nil, "")
		return nil, nil
	default:
		w.count(func(s *Stats) { s.Puts++ })
		endOwnWrite := w.ownWrite()
		defer endOwnWrite()
		stored, newETag, err := w.store.Put(ctx, work, etag)
		if err != nil {
			w.failed(err)
			return nil, fmt.Errorf("put: %w", err)
		}
		w.remember(stored, newETag)
		return stored, nil
	}
}

// ownWrite marks this writer's write as in flight until end (see writing).
func (w *Writer[T]) ownWrite() (end func()) {
	w.mu.Lock()
	w.writing = true
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		w.writing = false
		w.mu.Unlock()
	}
}

func (w *Writer[T]) failed(err error) {
	if w.opts.IsPreconditionFailed(err) {
		w.count(func(s *Stats) { s.Conflicts++ })
	}
	w.Invalidate()
}

func (w *Writer[T]) count(f func(*Stats)) {
	w.mu.Lock()
	f(&w.stats)
	w.mu.Unlock()
}

// finish answers every request: its own mutation error, else the batch's write error.
// The stored model is handed out as it is: callers only read it (see Submit), and the cache
// never modifies a model in place.
func (w *Writer[T]) finish(batch []*request[T], errs []error, stored *T, writeErr error) {
	var shared *T
	if writeErr == nil {
		shared = stored
	}
	for i, r := range batch {
		res := result[T]{obj: shared, err: writeErr}
		if errs != nil && errs[i] != nil {
			res = result[T]{err: errs[i]}
		}
		r.done <- res
	}
}
