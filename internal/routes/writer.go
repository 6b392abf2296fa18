package routes

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/arm"
)

// Store reads and writes one route table.
type Store interface {
	// Get returns the table, or (nil, nil) when it does not exist.
	Get(ctx context.Context) (*armnetwork.RouteTable, error)
	// Put writes the table; ifMatch is the ETag read before ("" for a new table).
	Put(ctx context.Context, rt armnetwork.RouteTable, ifMatch string) (*armnetwork.RouteTable, error)
}

// ARMStore is the Store of a route table in ARM.
type ARMStore struct {
	Client        *armnetwork.RouteTablesClient
	ResourceGroup string
	Name          string
	PollFrequency time.Duration
}

// Get reads the table.
func (s *ARMStore) Get(ctx context.Context) (*armnetwork.RouteTable, error) {
	resp, err := s.Client.Get(ctx, s.ResourceGroup, s.Name, nil)
	if arm.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &resp.RouteTable, nil
}

// Put writes the table with If-Match (If-None-Match: * for a new table, so two writers cannot
// both create it).
func (s *ARMStore) Put(ctx context.Context, rt armnetwork.RouteTable, ifMatch string) (*armnetwork.RouteTable, error) {
	h := http.Header{}
	if ifMatch != "" {
		h.Set("If-Match", ifMatch)
	} else {
		h.Set("If-None-Match", "*")
	}
	ctx = policy.WithHTTPHeader(ctx, h)
	poller, err := s.Client.BeginCreateOrUpdate(ctx, s.ResourceGroup, s.Name, rt, nil)
	if err != nil {
		return nil, err
	}
	resp, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: s.PollFrequency})
	if err != nil {
		return nil, err
	}
	return &resp.RouteTable, nil
}

// WriterOptions tunes a Writer.
type WriterOptions struct {
	// Location of a table the writer has to create.
	Location string
	// Tags of a table the writer creates.
	Tags map[string]*string
	// GatherWindow is how long the first change of a batch waits for others (default 200ms).
	// Changes that arrive while a PUT is in flight join the next batch anyway.
	GatherWindow time.Duration
	// CacheTTL of the table read by List (default 120s); the writer's own PUTs refresh it.
	CacheTTL time.Duration
	// MaxAttempts of read-modify-write per batch on 412 (default 5).
	MaxAttempts int
	// Timeout of one batch (default 5m).
	Timeout time.Duration
}

// Writer is the one writer of a route table. Every Submit joins the next batch; a batch is one
// read-modify-write: read the table (cached ETag when fresh), apply all ops, PUT with If-Match;
// on 412 re-read and re-apply. Each caller gets its batch's result.
type Writer struct {
	store Store
	opts  WriterOptions

	mu      sync.Mutex
	pending []*request
	running bool
	cached  *armnetwork.RouteTable
	cacheAt time.Time
	exists  bool
}

type request struct {
	op   Op
	done chan error
}

// NewWriter creates the writer of one table.
func NewWriter(store Store, opts WriterOptions) *Writer {
	if opts.GatherWindow < 0 {
		opts.GatherWindow = 0
	} else if opts.GatherWindow == 0 {
		opts.GatherWindow = 200 * time.Millisecond
	}
	if opts.CacheTTL <= 0 {
		opts.CacheTTL = 120 * time.Second
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 5
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Minute
	}
	return &Writer{store: store, opts: opts}
}

// Submit queues op and waits for the result of the batch that carries it.
func (w *Writer) Submit(ctx context.Context, op Op) error {
	r := &request{op: op, done: make(chan error, 1)}
	w.mu.Lock()
	w.pending = append(w.pending, r)
	if !w.running {
		w.running = true
		go w.run()
	}
	w.mu.Unlock()
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		// The op stays queued and is applied anyway; the caller will see it in the next List.
		return ctx.Err()
	}
}

func (w *Writer) run() {
	for {
		if w.opts.GatherWindow > 0 {
			time.Sleep(w.opts.GatherWindow)
		}
		w.mu.Lock()
		batch := w.pending
		w.pending = nil
		if len(batch) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		ops := make([]Op, len(batch))
		for i, r := range batch {
			ops[i] = r.op
		}
		ctx, cancel := context.WithTimeout(context.Background(), w.opts.Timeout)
		err := w.apply(ctx, ops)
		cancel()
		if err != nil {
			klog.ErrorS(err, "Route table update failed", "changes", len(ops))
		}
		for _, r := range batch {
			r.done <- err
		}
	}
}

func (w *Writer) apply(ctx context.Context, ops []Op) error {
	var lastErr error
	for attempt := 0; attempt < w.opts.MaxAttempts; attempt++ {
		rt, err := w.read(ctx, attempt > 0)
		if err != nil {
			return fmt.Errorf("reading route table: %w", err)
		}
		etag := ""
		var current []*armnetwork.Route
		if rt != nil {
			etag = deref(rt.Etag)
			if rt.Properties != nil {
				current = rt.Properties.Routes
			}
		}
		desired, changed := Apply(current, ops)
		if rt != nil && !changed {
			return nil
		}
		next := armnetwork.RouteTable{Location: to.Ptr(w.opts.Location), Tags: w.opts.Tags,
			Properties: &armnetwork.RouteTablePropertiesFormat{Routes: desired}}
		if rt != nil {
			next.Location, next.Tags = rt.Location, rt.Tags
			props := *rt.Properties
			props.Routes = desired
			next.Properties = &props
			// Read-only and server-computed fields are not sent back.
			next.Properties.Subnets, next.Properties.ProvisioningState, next.Properties.ResourceGUID = nil, nil, nil
		}
		out, err := w.store.Put(ctx, next, etag)
		if err == nil {
			w.setCache(out)
			klog.V(2).InfoS("Route table updated", "changes", len(ops), "routes", len(desired), "attempt", attempt+1)
			return nil
		}
		lastErr = err
		if !arm.IsPreconditionFailed(err) {
			w.invalidate()
			return fmt.Errorf("writing route table: %w", err)
		}
		klog.V(2).InfoS("Route table changed under us (412); re-reading", "attempt", attempt+1)
	}
	return fmt.Errorf("writing route table: still conflicting after %d attempts: %w", w.opts.MaxAttempts, lastErr)
}

// read returns the table from cache when fresh (unless force), else from the store.
func (w *Writer) read(ctx context.Context, force bool) (*armnetwork.RouteTable, error) {
	w.mu.Lock()
	if !force && w.exists && w.cached != nil && time.Since(w.cacheAt) < w.opts.CacheTTL {
		rt := w.cached
		w.mu.Unlock()
		return rt, nil
	}
	w.mu.Unlock()
	rt, err := w.store.Get(ctx)
	if err != nil {
		return nil, err
	}
	w.setCache(rt)
	return rt, nil
}

func (w *Writer) setCache(rt *armnetwork.RouteTable) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cached, w.cacheAt, w.exists = rt, time.Now(), rt != nil
}

func (w *Writer) invalidate() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cached, w.exists = nil, false
}

// List returns the routes of the table (cached up to CacheTTL; the writer's PUTs refresh it).
// A missing table has no routes.
func (w *Writer) List(ctx context.Context) ([]*armnetwork.Route, error) {
	rt, err := w.read(ctx, false)
	if err != nil {
		return nil, err
	}
	if rt == nil || rt.Properties == nil {
		return nil, nil
	}
	return rt.Properties.Routes, nil
}
