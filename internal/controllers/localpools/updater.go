package localpools

import (
	"context"
	"errors"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/multislb"
	"github.com/azure-ccm/azure-ccm/internal/tombstone"
)

// Event reasons (the existing provider's).
const (
	ReasonPoolUpdated      = "LoadBalancerBackendPoolUpdated"
	ReasonPoolUpdateFailed = "LoadBalancerBackendPoolUpdateFailed"
)

// Syncer writes one service's dedicated pools (*multislb.Placer).
type Syncer interface {
	SyncLocalPool(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) (multislb.LocalPoolResult, error)
}

// Options wire an Updater.
type Options struct {
	ClusterName string
	LB          Syncer
	Services    corelisters.ServiceLister
	Nodes       corelisters.NodeLister
	// HasSynced are the informers' sync checks: no flush before all are true.
	HasSynced []cache.InformerSynced
	Recorder  record.EventRecorder
	// Interval between flushes (loadBalancerBackendPoolUpdateIntervalInSeconds; default 30s).
	Interval time.Duration
	// RetryBase and RetryMax bound the backoff of a failed pool (default 1s, 5m).
	RetryBase, RetryMax time.Duration
	// Workers flush pools in parallel (default 32). They mostly wait on the load balancer
	// writers, which put the pools of one load balancer that change together into one write:
	// the more of a flush is submitted at once, the fewer writes.
	Workers int
}

// Updater batches endpoint changes per service pool and flushes them periodically.
type Updater struct {
	o Options

	mu      sync.Mutex
	pending map[string]time.Time // namespace/name -> not before
	fails   map[string]int
}

// New returns an updater; Run starts it.
func New(o Options) (*Updater, error) {
	if o.LB == nil || o.Services == nil || o.Nodes == nil {
		return nil, errors.New("localpools: LB, Services and Nodes are required")
	}
	if o.Interval <= 0 {
		o.Interval = 30 * time.Second
	}
	if o.RetryBase <= 0 {
		o.RetryBase = time.Second
	}
	if o.RetryMax <= 0 {
		o.RetryMax = 5 * time.Minute
	}
	if o.Workers <= 0 {
		o.Workers = 32
	}
	return &Updater{o: o, pending: map[string]time.Time{}, fails: map[string]int{}}, nil
}

// Enqueue marks the service's pool dirty; it is written at the next flush.
func (u *Updater) Enqueue(key string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.pending[key]; !ok {
		u.pending[key] = time.Time{}
		pendingPools.Set(float64(len(u.pending)))
	}
}

// SliceHandler is the EndpointSlice event handler: EndpointSlices of any service and Services that are
// (or were) externalTrafficPolicy: Local mark the service dirty. Which services have a dedicated
// pool is decided at flush time, from the then current Service.
func (u *Updater) SliceHandler() cache.ResourceEventHandler {
	enqueue := func(obj any) {
		s, ok := tombstone.As[*discoveryv1.EndpointSlice](obj)
		if !ok {
			return
		}
		name := s.Labels[discoveryv1.LabelServiceName]
		if name == "" {
			return
		}
		if svc, err := u.o.Services.Services(s.Namespace).Get(name); err == nil && !isLocal(svc) {
			return
		}
		u.Enqueue(s.Namespace + "/" + name)
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, n any) { enqueue(n) }, DeleteFunc: enqueue}
}

// ServiceHandler marks Local LoadBalancer services dirty when they appear or change.
func (u *Updater) ServiceHandler() cache.ResourceEventHandler {
	enqueue := func(obj any) {
		if svc, ok := obj.(*v1.Service); ok && isLocal(svc) {
			u.Enqueue(svc.Namespace + "/" + svc.Name)
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, n any) { enqueue(n) }}
}

func isLocal(svc *v1.Service) bool {
	return svc.Spec.Type == v1.ServiceTypeLoadBalancer && svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
}

// Run waits for the informers, marks every Local service dirty (a restart repairs whatever a flush in progress left) and flushes every
// Interval until ctx ends.
func (u *Updater) Run(ctx context.Context) {
	defer runtime.HandleCrash()
	if !cache.WaitForCacheSync(ctx.Done(), u.o.HasSynced...) {
		return
	}
	svcs, err := u.o.Services.List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "Listing services for the Local pool updater")
	}
	for _, svc := range svcs {
		if isLocal(svc) {
			u.Enqueue(svc.Namespace + "/" + svc.Name)
		}
	}
	klog.InfoS("Local service pool updater started", "interval", u.o.Interval)
	timer := time.NewTimer(u.o.Interval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		began := time.Now()
		next := u.Flush(ctx)
		// Flushes start every interval (not an interval after the last one ended): a change
		// that just missed a flush waits one interval, however long the flush's writes took.
		wait := max(u.o.Interval-time.Since(began), 10*time.Millisecond)
		if !next.IsZero() {
			if d := time.Until(next); d < wait {
				wait = max(d, 10*time.Millisecond)
			}
		}
		timer.Reset(wait)
	}
}

// Flush writes every dirty pool that is due and returns when the earliest retry not yet due
// is (zero: none).
func (u *Updater) Flush(ctx context.Context) time.Time {
	start := time.Now()
	u.mu.Lock()
	var due []string
	var next time.Time
	for k, nb := range u.pending {
		if nb.After(start) {
			if next.IsZero() || nb.Before(next) {
				next = nb
			}
			continue
		}
		due = append(due, k)
		delete(u.pending, k)
	}
	u.mu.Unlock()
	if len(due) == 0 {
		return next
	}
	nodes, err := u.o.Nodes.List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "Listing nodes for the Local pool updater")
	}
	work := make(chan string)
	var wg sync.WaitGroup
	for range min(u.o.Workers, len(due)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for key := range work {
				u.flushOne(ctx, key, nodes)
			}
		}()
	}
	for _, k := range due {
		work <- k
	}
	close(work)
	wg.Wait()
	flushDuration.Observe(time.Since(start).Seconds())
	u.mu.Lock()
	pendingPools.Set(float64(len(u.pending)))
	for _, nb := range u.pending {
		if !nb.IsZero() && (next.IsZero() || nb.Before(next)) {
			next = nb
		}
	}
	u.mu.Unlock()
	return next
}

func (u *Updater) flushOne(ctx context.Context, key string, nodes []*v1.Node) {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	svc, err := u.o.Services.Services(ns).Get(name)
	if err != nil {
		// Deleted: the service reconcile removes its pool.
		u.forget(key)
		return
	}
	res, err := u.o.LB.SyncLocalPool(ctx, u.o.ClusterName, svc, nodes)
	if err != nil {
		flushes.WithLabelValues("error").Inc()
		u.retry(key)
		klog.ErrorS(err, "Local service pool update failed; retrying", "service", key)
		if u.o.Recorder != nil {
			u.o.Recorder.Event(svc, v1.EventTypeWarning, ReasonPoolUpdateFailed, "updating the dedicated backend pool failed (retried with backoff): "+err.Error())
		}
		return
	}
	u.forget(key)
	flushes.WithLabelValues(string(res)).Inc()
	if res == multislb.LocalPoolUpdated {
		klog.V(2).InfoS("Local service pool updated", "service", key)
		if u.o.Recorder != nil {
			u.o.Recorder.Event(svc, v1.EventTypeNormal, ReasonPoolUpdated, "dedicated backend pool updated to the nodes of its ready endpoints")
		}
	}
}

func (u *Updater) forget(key string) {
	u.mu.Lock()
	delete(u.fails, key)
	u.mu.Unlock()
}

// retry puts a failed pool back with exponential backoff; a newer change does not make it due
// sooner (Enqueue keeps the existing not-before).
func (u *Updater) retry(key string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.fails[key]++
	d := u.o.RetryBase << min(u.fails[key]-1, 20)
	if d > u.o.RetryMax || d <= 0 {
		d = u.o.RetryMax
	}
	u.pending[key] = time.Now().Add(d)
}
