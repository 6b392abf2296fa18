// Package adminstate is the admin-state controller: while a node carries a
// draining taint (node.kubernetes.io/out-of-service or
// cloudprovider.azure.microsoft.com/draining=spot-eviction) every backend entry of the node on
// every cluster load balancer gets admin state Down, so new flows stop at once instead of after
// failed probes; when the taints go, the entries return to None. The first PreemptScheduled
// event of a node adds the draining taint. The controller has its own rate-limited queue,
// independent of the service controller, and writes pools through their load balancers'
// group-commit writers (the ones the service reconciles use), so many nodes draining at once
// cost one PUT per pool and its writes never conflict with service reconciles. The decisions
// are package planner's.
package adminstate

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/azureid"
	"github.com/azure-ccm/azure-ccm/internal/controllers/adminstate/planner"
	"github.com/azure-ccm/azure-ccm/internal/controllers/keyqueue"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/backends"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
	"github.com/azure-ccm/azure-ccm/internal/tombstone"
	"github.com/azure-ccm/azure-ccm/internal/writer"
)

// Event reasons on the Node.
const (
	ReasonDown     = "AdminStateDown"
	ReasonRestored = "AdminStateRestored"
	ReasonFailed   = "AdminStateFailed"
	ReasonTainted  = "SpotEvictionTainted"
)

// Options configure the controller. ClusterName, Kube, Nodes, LoadBalancers and
// LoadBalancerIDs are required.
type Options struct {
	ClusterName string
	Kube        kubernetes.Interface
	Nodes       coreinformers.NodeInformer
	// Events is an informer of PreemptScheduled events of nodes (see EventsInformer); nil
	// disables the spot-eviction path.
	Events coreinformers.EventInformer
	// LoadBalancers are the process's load balancer writers; a backend pool is written
	// through its load balancer's.
	LoadBalancers *writer.Registry[armnetwork.LoadBalancer]
	// LoadBalancerIDs are every load balancer the cluster may have (plan.LoadBalancerIDs).
	LoadBalancerIDs []string
	// Recorder receives the Node events (optional).
	Recorder record.EventRecorder
	// Workers processing the queue (default 8; they mostly wait for a pool round).
	Workers int
	// GatherWindow is the quiet gap that ends a round's gathering of nodes before it reads
	// the pools (default 150ms; negative: none), GatherMax the longest gathering (default
	// 500ms): nodes tainted together then share one PUT per pool.
	GatherWindow, GatherMax time.Duration
	// ResyncPeriod re-checks every cluster pool against the desired state, healing a missed
	// update (default 2 minutes; reads the load balancers through the writers' cache).
	ResyncPeriod time.Duration
	// RetryBase and RetryMax bound the exponential backoff of failed nodes (default 1s, 5m).
	RetryBase, RetryMax time.Duration
	// MaxEventAge ignores PreemptScheduled events last seen longer ago (default 10 minutes):
	// an old event delivered again after a restart must not taint a node an operator cleared.
	MaxEventAge time.Duration
	// Now is the clock (tests).
	Now func() time.Time
}

type key struct {
	Node string
	Spot bool // a PreemptScheduled event to act on, not an admin-state sync
	// Event is the namespace/name of a PreemptScheduled event to judge. Events are judged by
	// the workers, which start once the node cache has synced: judged in the informer's
	// handler, an event delivered before its node was listed counted as "unknown node" and
	// was lost.
	Event string
}

// nodeState is what the controller remembers of one node, by UID: a replacement node with the
// same name starts afresh.
type nodeState struct {
	name       string
	desired    planner.State
	observedAt time.Time     // when desired last changed
	applied    planner.State // state confirmed on every pool since desired last changed ("" = none)
	// PreemptScheduled bookkeeping: acted once per node until the taint is cleared.
	spotActed     bool
	spotClearedAt time.Time
	spotEventAt   time.Time // last-seen time of the event waiting to be acted on
}

// Controller applies the admin state of draining nodes.
type Controller struct {
	o      Options
	queue  *keyqueue.Queue[key]
	nodes  corelisters.NodeLister
	events corelisters.EventLister // nil without an events informer

	mu       sync.Mutex
	states   map[types.UID]*nodeState
	byName   map[string]types.UID
	flushers map[string]*flusher // by lower-cased pool ID
	// life ends when Run returns: the flushers' rounds write only while the controller runs.
	life context.Context

	synced []cache.InformerSynced
}

// New builds the controller and registers its informer handlers.
func New(o Options) (*Controller, error) {
	if o.ClusterName == "" || o.Kube == nil || o.Nodes == nil || o.LoadBalancers == nil || len(o.LoadBalancerIDs) == 0 {
		return nil, errors.New("adminstate: ClusterName, Kube, Nodes, LoadBalancers and LoadBalancerIDs are required")
	}
	if o.Workers <= 0 {
		o.Workers = 8
	}
	if o.GatherWindow < 0 {
		o.GatherWindow = 0
	} else if o.GatherWindow == 0 {
		o.GatherWindow = 150 * time.Millisecond
	}
	if o.GatherMax <= 0 {
		o.GatherMax = 500 * time.Millisecond
	}
	if o.ResyncPeriod <= 0 {
		o.ResyncPeriod = 2 * time.Minute
	}
	if o.MaxEventAge <= 0 {
		o.MaxEventAge = 10 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	RegisterMetrics()
	c := &Controller{
		o:        o,
		nodes:    o.Nodes.Lister(),
		states:   map[types.UID]*nodeState{},
		byName:   map[string]types.UID{},
		flushers: map[string]*flusher{},
		life:     context.Background(), // until Run
	}
	c.queue = keyqueue.New(keyqueue.Options[key]{Name: "admin-state", RetryBase: o.RetryBase, RetryMax: o.RetryMax,
		Sync: c.sync,
		Failed: func(k key, err error, retries int) {
			klog.ErrorS(err, "Admin-state sync failed; retrying with backoff", "node", k.Node, "spotEviction", k.Spot, "attempt", retries+1)
		}})
	if _, err := o.Nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.nodeChanged(nil, obj.(*v1.Node)) },
		UpdateFunc: func(old, cur any) { c.nodeChanged(old.(*v1.Node), cur.(*v1.Node)) },
		DeleteFunc: c.nodeDeleted,
	}); err != nil {
		return nil, err
	}
	c.synced = append(c.synced, o.Nodes.Informer().HasSynced)
	if o.Events != nil {
		c.events = o.Events.Lister()
		if _, err := o.Events.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.eventChanged(obj.(*v1.Event)) },
			UpdateFunc: func(_, cur any) { c.eventChanged(cur.(*v1.Event)) },
		}); err != nil {
			return nil, err
		}
		c.synced = append(c.synced, o.Events.Informer().HasSynced)
	}
	return c, nil
}

// Run processes the queue until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	klog.InfoS("Starting admin-state controller", "cluster", c.o.ClusterName, "workers", c.o.Workers, "gatherWindow", c.o.GatherWindow, "gatherMax", c.o.GatherMax)
	defer klog.InfoS("Shutting down admin-state controller")
	if !cache.WaitForNamedCacheSync("admin-state", ctx.Done(), c.synced...) {
		return
	}
	c.mu.Lock()
	c.life = ctx
	c.mu.Unlock()
	c.queue.Start(ctx, c.o.Workers)
	// Heal at start (a taint removed while no CCM ran) and periodically.
	go wait.UntilWithContext(ctx, c.resync, c.o.ResyncPeriod)
	<-ctx.Done()
}

// nodeChanged enqueues nodes whose draining state changed. Nodes that are not draining and
// never were cost nothing: a start-up with many nodes makes no ARM call.
func (c *Controller) nodeChanged(old, cur *v1.Node) {
	if old != nil && old.UID != cur.UID {
		c.forget(old)
		old = nil
	}
	want := planner.Desired(cur)
	c.mu.Lock()
	st := c.stateLocked(cur)
	changed := st.desired != want
	if old == nil && want == planner.None {
		changed = false
	}
	if changed {
		// Rounds write every node's desired state, so from now on any round (this node's or
		// another's) may put the new state on some pools: what was confirmed before no longer
		// says what Azure holds. Keeping it would let a quick Down→None→Down skip the last
		// write (TestPreemptScheduledTaintsOnce).
		st.desired, st.observedAt, st.applied = want, c.o.Now(), ""
	}
	if old != nil && planner.HasSpotTaint(old) && !planner.HasSpotTaint(cur) {
		// The draining taint was cleared: a later PreemptScheduled event acts again.
		st.spotActed, st.spotClearedAt = false, c.o.Now()
	}
	c.updateGaugeLocked()
	if changed {
		for _, f := range c.flushers {
			f.poke()
		}
	}
	c.mu.Unlock()
	if changed {
		klog.V(2).InfoS("Node draining state changed", "node", cur.Name, "adminState", want, "taints", planner.DrainingTaints(cur))
		c.queue.Add(key{Node: cur.Name})
	}
}

func (c *Controller) nodeDeleted(obj any) {
	n, ok := tombstone.As[*v1.Node](obj)
	if !ok {
		return
	}
	// Nothing is called: its entries go with normal pool reconciliation.
	klog.V(2).InfoS("Node deleted; its backend entries leave with pool reconciliation", "node", n.Name)
	c.forget(n)
}

func (c *Controller) forget(n *v1.Node) {
	c.mu.Lock()
	delete(c.states, n.UID)
	if c.byName[n.Name] == n.UID {
		delete(c.byName, n.Name)
	}
	c.updateGaugeLocked()
	c.mu.Unlock()
}

func (c *Controller) stateLocked(n *v1.Node) *nodeState {
	st, ok := c.states[n.UID]
	if !ok {
		st = &nodeState{name: n.Name, desired: planner.None}
		c.states[n.UID] = st
	}
	c.byName[n.Name] = n.UID
	return st
}

func (c *Controller) updateGaugeLocked() {
	d := 0
	for _, st := range c.states {
		if st.desired == planner.Down {
			d++
		}
	}
	drainingNodes.Set(float64(d))
}

// sync handles one key: a spot eviction event to judge, a node's spot eviction, or a node.
func (c *Controller) sync(ctx context.Context, k key) error {
	switch {
	case k.Event != "":
		return c.judgeEvent(k.Event)
	case k.Spot:
		return c.syncSpot(ctx, k.Node)
	default:
		return c.syncNode(ctx, k.Node)
	}
}

// syncNode brings every backend entry of the node to its desired state.
func (c *Controller) syncNode(ctx context.Context, name string) error {
	n, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil // deleted: nothing to call
	}
	if err != nil {
		return err
	}
	c.mu.Lock()
	st := c.stateLocked(n)
	want, since, applied := st.desired, st.observedAt, st.applied
	c.mu.Unlock()
	if want == applied {
		return nil
	}
	pools, err := c.clusterPools(ctx)
	if err != nil {
		c.failed(n, want, nil, err)
		return err
	}
	byLB := groupByLB(pools)
	errs := make([]error, len(byLB))
	var wg sync.WaitGroup
	for i, lbPools := range byLB {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.flusherFor(lbPools).wait(ctx, since)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.failed(n, want, pools, err)
		return err
	}
	c.mu.Lock()
	if cur, ok := c.states[n.UID]; ok && cur.desired == want && cur.observedAt.Equal(since) {
		cur.applied = want
	}
	c.mu.Unlock()
	transitionLatency.WithLabelValues(string(want)).Observe(c.o.Now().Sub(since).Seconds())
	klog.V(2).InfoS("Node backend entries carry their admin state", "node", name, "adminState", want, "pools", poolNames(pools), "after", c.o.Now().Sub(since))
	return nil
}

func (c *Controller) failed(n *v1.Node, want planner.State, pools []poolRef, err error) {
	if c.o.Recorder != nil {
		c.o.Recorder.Eventf(n, v1.EventTypeWarning, ReasonFailed, "Setting admin state %s on backend pools %s failed (will retry): %v", want, strings.Join(poolNames(pools), ", "), err)
	}
}

// poolRef is one cluster backend pool of one load balancer.
type poolRef struct {
	LBID, ID, Name string
}

func poolNames(ps []poolRef) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, azureid.Name(p.LBID)+"/"+p.Name)
	}
	return out
}

// clusterPools lists the cluster's backend pools (IPv4 and IPv6) on every cluster load
// balancer that exists, from the load balancer writers (their cache while fresh).
func (c *Controller) clusterPools(ctx context.Context) ([]poolRef, error) {
	names := map[string]bool{}
	for _, f := range []naming.Family{naming.IPv4, naming.IPv6} {
		names[strings.ToLower(naming.BackendPoolName(c.o.ClusterName, f))] = true
	}
	var out []poolRef
	for _, id := range c.o.LoadBalancerIDs {
		lb, err := c.o.LoadBalancers.For(id).Peek(ctx)
		if err != nil {
			return nil, fmt.Errorf("load balancer %s: %w", azureid.Name(id), err)
		}
		if lb == nil || lb.Properties == nil {
			continue
		}
		for _, p := range lb.Properties.BackendAddressPools {
			if p == nil || p.Name == nil || !names[strings.ToLower(*p.Name)] {
				continue
			}
			out = append(out, poolRef{LBID: id, ID: id + "/backendAddressPools/" + *p.Name, Name: *p.Name})
		}
	}
	return out, nil
}

// groupByLB splits pools by load balancer, keeping their order.
func groupByLB(pools []poolRef) [][]poolRef {
	var out [][]poolRef
	idx := map[string]int{}
	for _, p := range pools {
		k := strings.ToLower(p.LBID)
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], p)
	}
	return out
}

// flusherFor returns the flusher of one load balancer's cluster pools. The pools of one load
// balancer share its ETag (a pool PUT changes it), so writing them concurrently makes all but
// one fail with 412 and write again: a round writes them one after the other instead, and
// different load balancers in parallel.
func (c *Controller) flusherFor(pools []poolRef) *flusher {
	k := strings.ToLower(pools[0].LBID)
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.flushers[k]
	if !ok {
		f = &flusher{window: c.o.GatherWindow, maxWindow: c.o.GatherMax, run: c.updatePools, life: c.life}
		c.flushers[k] = f
	}
	// The pools of a load balancer rarely change (IPv6 added); the latest list is used.
	f.setPools(pools)
	return f
}

func (c *Controller) updatePools(ctx context.Context, pools []poolRef, applied func()) error {
	var errs []error
	for _, p := range pools {
		errs = append(errs, c.updatePool(ctx, p, applied))
	}
	return errors.Join(errs...)
}

// updatePool runs one round on a pool: a fresh read of its load balancer (the pool may have
// changed outside this process, e.g. NIC-based membership), the level-triggered edit, a pool PUT
// when it changed.
func (c *Controller) updatePool(ctx context.Context, p poolRef, applied func()) error {
	start := time.Now()
	w := c.o.LoadBalancers.For(p.LBID)
	w.Invalidate()
	var changes []planner.Change
	_, err := w.SubmitChild(ctx, p.Name, func(cur *armnetwork.LoadBalancer) (*armnetwork.LoadBalancer, error) {
		applied()
		changes = nil
		if pool := backends.FindPool(cur, p.Name); pool != nil {
			changes = planner.Apply(pool, members(c.nodes, pool))
		}
		return cur, nil
	})
	latency.WithLabelValues("update_pool").Observe(time.Since(start).Seconds())
	if err != nil {
		operations.WithLabelValues("update_pool", "error").Inc()
		countError("update_pool", err)
		return fmt.Errorf("backend pool %s of load balancer %s: %w", p.Name, azureid.Name(p.LBID), err)
	}
	if len(changes) == 0 {
		operations.WithLabelValues("update_pool", "unchanged").Inc()
		return nil
	}
	operations.WithLabelValues("update_pool", "success").Inc()
	c.report(p, changes)
	return nil
}

// report logs and records the changes of one pool write, one event per node.
func (c *Controller) report(p poolRef, changes []planner.Change) {
	byNode := map[string][]planner.Change{}
	for _, ch := range changes {
		byNode[ch.Node] = append(byNode[ch.Node], ch)
		entriesChanged.WithLabelValues(string(ch.To)).Inc()
	}
	nodes := make([]string, 0, len(byNode))
	for n := range byNode {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	klog.InfoS("Backend admin state updated", "loadBalancer", azureid.Name(p.LBID), "pool", p.Name, "nodes", nodes, "entries", len(changes))
	if c.o.Recorder == nil {
		return
	}
	for _, name := range nodes {
		chs := byNode[name]
		n, err := c.nodes.Get(name)
		if err != nil {
			continue
		}
		entries := make([]string, 0, len(chs))
		for _, ch := range chs {
			entries = append(entries, ch.Entry)
		}
		to := chs[0].To
		if to == planner.Down {
			c.o.Recorder.Eventf(n, v1.EventTypeNormal, ReasonDown, "Backend entries %s of pool %s on load balancer %s set to admin state Down (draining taints: %s)",
				strings.Join(entries, ", "), p.Name, azureid.Name(p.LBID), strings.Join(planner.DrainingTaints(n), ", "))
		} else {
			c.o.Recorder.Eventf(n, v1.EventTypeNormal, ReasonRestored, "Backend entries %s of pool %s on load balancer %s restored to admin state None",
				strings.Join(entries, ", "), p.Name, azureid.Name(p.LBID))
		}
	}
}

// members are all known nodes with their desired state, matched to pool's NIC-based members
// through their providerID (scale set instances).
func members(lister corelisters.NodeLister, pool *armnetwork.BackendAddressPool) []planner.Member {
	nodes, err := lister.List(labels.Everything())
	if err != nil {
		return nil
	}
	var configs []string
	if pool != nil && pool.Properties != nil {
		for _, r := range pool.Properties.BackendIPConfigurations {
			if r != nil && r.ID != nil {
				configs = append(configs, *r.ID)
			}
		}
		for _, e := range pool.Properties.LoadBalancerBackendAddresses {
			if e != nil && e.Properties != nil && e.Properties.NetworkInterfaceIPConfiguration != nil && e.Properties.NetworkInterfaceIPConfiguration.ID != nil {
				configs = append(configs, *e.Properties.NetworkInterfaceIPConfiguration.ID)
			}
		}
	}
	idx := planner.NewConfigIndex(configs)
	out := make([]planner.Member, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, planner.MemberOf(n, idx.Of(n.Spec.ProviderID)))
	}
	return out
}

// PoolEntries is the edit the load balancer's membership writes run on a pool they are about to
// write: entries get the admin state of their node, so a new entry of a draining node is
// written Down at once instead of None.
func PoolEntries(nodes corelisters.NodeLister) func(pool *armnetwork.BackendAddressPool) {
	return func(pool *armnetwork.BackendAddressPool) {
		planner.Apply(pool, members(nodes, pool))
	}
}

// resync checks every cluster pool (as the load balancer writers know it) against the desired
// state and runs a round on those that drifted.
func (c *Controller) resync(ctx context.Context) {
	pools, err := c.clusterPools(ctx)
	if err != nil {
		klog.ErrorS(err, "Admin-state resync: listing cluster pools")
		return
	}
	now := c.o.Now()
	for _, lbPools := range groupByLB(pools) {
		lb, err := c.o.LoadBalancers.For(lbPools[0].LBID).Peek(ctx)
		if err != nil || lb == nil || lb.Properties == nil {
			continue
		}
		var drifted []string
		for _, p := range lbPools {
			for _, inline := range lb.Properties.BackendAddressPools {
				if inline != nil && strings.EqualFold(str(inline.Name), p.Name) && planner.NeedsWrite(inline, members(c.nodes, inline)) {
					drifted = append(drifted, p.Name)
				}
			}
		}
		if len(drifted) == 0 {
			continue
		}
		lbName := azureid.Name(lbPools[0].LBID)
		klog.InfoS("Admin-state resync: pools drifted from the desired state", "loadBalancer", lbName, "pools", drifted)
		f := c.flusherFor(lbPools)
		go func() {
			if err := f.wait(ctx, now); err != nil {
				klog.ErrorS(err, "Admin-state resync failed", "loadBalancer", lbName, "pools", drifted)
			}
		}()
	}
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
