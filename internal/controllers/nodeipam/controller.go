// Package nodeipam is the node-ipam controller (--allocate-node-cidrs): it gives every Node
// without spec.podCIDRs one pod CIDR per cluster CIDR (IPv4, IPv6 or both), which the route
// controller then programs into the route table. The decisions are in ipam; this package feeds it
// Node specs from the informer, writes its choices and reports on the Node.
//
// Two rules keep one CIDR from going to two nodes: the used set is rebuilt from every Node's
// spec before the first allocation (after a restart too), and a chosen CIDR stays taken until the
// Node is gone or shows other CIDRs — a write whose outcome is unknown is retried with the same
// CIDRs, never released on a guess.
package nodeipam

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/controllers/keyqueue"
	"github.com/azure-ccm/azure-ccm/internal/controllers/nodeipam/ipam"
	"github.com/azure-ccm/azure-ccm/internal/tombstone"
)

// Event reasons (on the Node).
const (
	ReasonAssigned         = "PodCIDRAssigned"
	ReasonNotAvailable     = "CIDRNotAvailable"
	ReasonAssignmentFailed = "CIDRAssignmentFailed"
	ReasonConflict         = "PodCIDRConflict"
	ReasonUnusable         = "PodCIDRNotInClusterCIDR"
)

// Options configure New.
type Options struct {
	Kube     kubernetes.Interface
	Nodes    coreinformers.NodeInformer
	Recorder record.EventRecorder
	// Specs are the pools (ipam.Plan of the flags).
	Specs []ipam.Spec
	// Workers write Nodes in parallel (default 10). RetryBase/RetryMax bound the per-node
	// backoff after a failure (default 1s and 5m).
	Workers             int
	RetryBase, RetryMax time.Duration
}

// Controller assigns pod CIDRs.
type Controller struct {
	o      Options
	lister corelisters.NodeLister
	synced cache.InformerSynced
	queue  *keyqueue.Queue[string]

	mu    sync.Mutex
	alloc *ipam.Allocator
	// waiting are nodes that found every CIDR taken: a release queues them again.
	waiting map[string]bool
}

// New wires the controller to the node informer; Run starts it.
func New(o Options) (*Controller, error) {
	if o.Kube == nil || o.Nodes == nil || o.Recorder == nil {
		return nil, fmt.Errorf("nodeipam: Kube, Nodes and Recorder are required")
	}
	alloc, err := ipam.NewAllocator(o.Specs)
	if err != nil {
		return nil, err
	}
	if o.Workers <= 0 {
		o.Workers = 10
	}
	c := &Controller{o: o, lister: o.Nodes.Lister(), synced: o.Nodes.Informer().HasSynced, alloc: alloc, waiting: map[string]bool{}}
	c.queue = keyqueue.New(keyqueue.Options[string]{Name: "node-ipam", RetryBase: o.RetryBase, RetryMax: o.RetryMax,
		Sync: c.sync,
		Failed: func(name string, err error, retries int) {
			klog.ErrorS(err, "Assigning pod CIDR failed; retrying with backoff", "node", name, "retries", retries)
		}})
	_, err = o.Nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.observe(obj) },
		UpdateFunc: func(_, obj any) { c.observe(obj) },
		DeleteFunc: c.deleted,
	})
	return c, err
}

func ipamNode(n *v1.Node) ipam.Node {
	cidrs := n.Spec.PodCIDRs
	if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
		cidrs = []string{n.Spec.PodCIDR}
	}
	return ipam.Node{Name: n.Name, UID: string(n.UID), PodCIDRs: cidrs}
}

// observe records a Node's CIDRs (claims are idempotent, so the informer's initial adds and
// the rebuild in Run may both see a node) and queues nodes without any.
func (c *Controller) observe(obj any) {
	n, ok := obj.(*v1.Node)
	if !ok {
		return
	}
	c.mu.Lock()
	obs := c.alloc.Observe(ipamNode(n))
	c.mu.Unlock()
	c.report(n, obs)
	if obs.NeedsCIDRs {
		c.queue.Add(n.Name)
	}
}

// report turns what the allocator learnt into events and metrics.
func (c *Controller) report(n *v1.Node, obs ipam.Observation) {
	for _, cf := range obs.Conflicts {
		conflicts.Inc()
		holders := fmt.Sprint(cf.Holders)
		if len(cf.Holders) == 1 && cf.Holders[0] == ipam.Reserved {
			holders = "the service CIDR (--service-cluster-ip-range)"
		}
		klog.ErrorS(nil, "Node's pod CIDR is also held elsewhere; it cannot be changed on the Node (delete and re-register the node)",
			"node", n.Name, "podCIDR", cf.CIDR, "heldBy", cf.Holders)
		c.o.Recorder.Eventf(n, v1.EventTypeWarning, ReasonConflict, "Pod CIDR %s overlaps %s", cf.CIDR, holders)
	}
	for _, u := range obs.Unusable {
		klog.ErrorS(nil, "Node's pod CIDR is outside every cluster CIDR (--cluster-cidr); not tracked", "node", n.Name, "podCIDR", u)
		c.o.Recorder.Eventf(n, v1.EventTypeWarning, ReasonUnusable, "Pod CIDR %q is not inside --cluster-cidr; the node-ipam controller does not track it", u)
	}
	if obs.Changed {
		c.updateUsage()
	}
}

func (c *Controller) deleted(obj any) {
	n, ok := tombstone.As[*v1.Node](obj)
	if !ok {
		return
	}
	c.mu.Lock()
	c.alloc.ForgetUID(n.Name, string(n.UID))
	retry := c.takeWaiting()
	c.mu.Unlock()
	releases.Inc()
	c.updateUsage()
	for _, name := range retry {
		c.queue.Add(name)
	}
}

// takeWaiting empties the waiting set (c.mu held).
func (c *Controller) takeWaiting() []string {
	var out []string
	for name := range c.waiting {
		out = append(out, name)
	}
	clear(c.waiting)
	return out
}

func (c *Controller) updateUsage() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.alloc.Pools() {
		cidrsUsed.WithLabelValues(p.Cluster().String()).Set(float64(p.Used()))
		cidrsCapacity.WithLabelValues(p.Cluster().String()).Set(float64(p.Size()))
	}
}

// Run rebuilds the used set from every Node, then assigns CIDRs until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	klog.InfoS("Starting node-ipam controller")
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced) {
		return
	}
	if err := c.rebuild(); err != nil {
		klog.ErrorS(err, "Node-ipam controller: cannot list nodes; no CIDR is assigned")
		return
	}
	c.queue.Start(ctx, c.o.Workers)
	<-ctx.Done()
}

// rebuild claims the CIDRs of every Node in the synced cache. Workers start only after it, so
// no CIDR a Node already has is ever handed out.
func (c *Controller) rebuild() error {
	nodes, err := c.lister.List(labels.Everything())
	if err != nil {
		return err
	}
	need := 0
	for _, n := range nodes {
		c.mu.Lock()
		obs := c.alloc.Observe(ipamNode(n))
		c.mu.Unlock()
		c.report(n, obs)
		if obs.NeedsCIDRs {
			need++
			c.queue.Add(n.Name)
		}
	}
	c.updateUsage()
	var usage []string
	for _, p := range c.alloc.Pools() {
		usage = append(usage, fmt.Sprintf("%s /%d: %d of %d used", p.Cluster(), p.NodeBits(), p.Used(), p.Size()))
	}
	klog.InfoS("Node-ipam controller rebuilt the used pod CIDRs from the nodes", "nodes", len(nodes), "withoutCIDR", need, "pools", usage)
	return nil
}

// sync gives the node its CIDRs if it has none.
func (c *Controller) sync(ctx context.Context, name string) error {
	n, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil // the delete handler released what it held
	}
	if err != nil {
		return err
	}
	c.mu.Lock()
	obs := c.alloc.Observe(ipamNode(n))
	if !obs.NeedsCIDRs {
		c.mu.Unlock()
		return nil
	}
	cidrs, err := c.alloc.Reserve(ipamNode(n))
	if err != nil {
		c.waiting[name] = true
	}
	c.mu.Unlock()
	if err != nil {
		assignments.WithLabelValues(resultNotAvailable).Inc()
		c.o.Recorder.Eventf(n, v1.EventTypeWarning, ReasonNotAvailable, "No pod CIDR for the node: %v", err)
		klog.ErrorS(err, "No pod CIDR left for node; it waits for a node to be deleted", "node", name)
		return nil // a deletion queues it again
	}
	c.updateUsage()
	perr := c.patch(ctx, n, cidrs)
	if perr == nil {
		assignments.WithLabelValues(resultAssigned).Inc()
		klog.InfoS("Assigned pod CIDRs", "node", name, "podCIDRs", cidrs)
		c.o.Recorder.Eventf(n, v1.EventTypeNormal, ReasonAssigned, "Assigned pod CIDRs %v", cidrs)
		return nil
	}
	// The write failed, or its outcome is unknown: look at the Node as it is now before
	// deciding anything about the CIDRs.
	cur, gerr := c.o.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(gerr):
		c.forget(name, string(n.UID))
		return nil
	case gerr != nil:
		assignments.WithLabelValues(resultError).Inc()
		return fmt.Errorf("writing pod CIDRs %v: %w; reading the node back: %w", cidrs, perr, gerr)
	case cur.UID != n.UID:
		// Recreated under the same name: the old Node's reservation goes, the new one is queued
		// by its own add event.
		c.forget(name, string(n.UID))
		return nil
	}
	c.mu.Lock()
	obs = c.alloc.Observe(ipamNode(cur))
	c.mu.Unlock()
	c.report(cur, obs)
	if !obs.NeedsCIDRs {
		return nil // the Node has its CIDRs (ours, a write that did land, or someone else's)
	}
	assignments.WithLabelValues(resultError).Inc()
	c.o.Recorder.Eventf(n, v1.EventTypeWarning, ReasonAssignmentFailed, "Writing pod CIDRs %v failed: %v", cidrs, perr)
	return fmt.Errorf("writing pod CIDRs %v: %w", cidrs, perr)
}

func (c *Controller) forget(name, uid string) {
	c.mu.Lock()
	c.alloc.ForgetUID(name, uid)
	retry := c.takeWaiting()
	c.mu.Unlock()
	c.updateUsage()
	for _, r := range retry {
		c.queue.Add(r)
	}
}

// patch sets spec.podCIDR(s). metadata.uid in the patch makes it fail on a Node recreated under
// the same name, and the API server refuses to change pod CIDRs once set, so the patch never
// overwrites a CIDR somebody else wrote.
func (c *Controller) patch(ctx context.Context, n *v1.Node, cidrs []netip.Prefix) error {
	s := make([]string, len(cidrs))
	for i, p := range cidrs {
		s[i] = p.String()
	}
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": n.UID},
		"spec":     map[string]any{"podCIDR": s[0], "podCIDRs": s},
	})
	if err != nil {
		return err
	}
	_, err = c.o.Kube.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, body, metav1.PatchOptions{})
	return err
}
