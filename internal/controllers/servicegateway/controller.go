// Package controller connects container-based load balancing to the cluster: it watches
// Services, EndpointSlices, Nodes and egress Pods, feeds the updater's DiffTracker, holds a
// finalizer on every Service it provisions, writes the ingress IP and reports on the Service.
package servicegateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/servicegateway/admission"
	dt "github.com/azure-ccm/azure-ccm/internal/servicegateway/difftracker"
	"github.com/azure-ccm/azure-ccm/internal/servicegateway/updater"
	"github.com/azure-ccm/azure-ccm/internal/tombstone"
	"github.com/azure-ccm/azure-ccm/internal/trim"
)

// Finalizer is held on every Service with gateway resources until they are gone (the
// existing provider's name).
const Finalizer = "servicegateway.azure.com/service-cleanup"

// Event reasons (documented in docs/operations.md).
const (
	ReasonReady    = "ServiceGatewayReady"
	ReasonRemoved  = "ServiceGatewayRemoved"
	ReasonFailed   = "ServiceGatewaySyncFailed"
	ReasonRejected = "UnsupportedLoadBalancerOption"
	ReasonIgnored  = "LoadBalancerOptionIgnored"
	ReasonEgress   = "InvalidEgressGatewayLabel"
)

// Options configure New.
type Options struct {
	Kube           kubernetes.Interface
	Services       coreinformers.ServiceInformer
	Nodes          coreinformers.NodeInformer
	EndpointSlices discoveryinformers.EndpointSliceInformer
	// EgressPods is an informer on pods carrying the egress label (see EgressPodsInformer).
	EgressPods coreinformers.PodInformer
	Recorder   record.EventRecorder
	Azure      *updater.Azure
	// Updater options (Azure and Callbacks are set by New).
	Updater updater.Options
}

// Controller is the service-gateway controller.
type Controller struct {
	o        Options
	u        *updater.Updater
	queue    workqueue.TypedRateLimitingInterface[string]
	services corelisters.ServiceLister
	nodes    corelisters.NodeLister
	slices   discoverylisters.EndpointSliceLister
	pods     corelisters.PodLister
	synced   []cache.InformerSynced

	mu      sync.Mutex
	byUID   map[string]types.NamespacedName // inbound identity → Service
	ips     map[string]string               // inbound identity → public IP reported by the updater
	removed map[string]bool                 // inbound identities whose resources are gone
	egress  map[string]bool                 // egress identities seen
	started bool
}

// EgressPodsInformer is a pod informer limited to egress pods (the label exists), so the
// controller does not cache every pod of the cluster.
func EgressPodsInformer(kube kubernetes.Interface, resync time.Duration) (informers.SharedInformerFactory, coreinformers.PodInformer) {
	f := informers.NewSharedInformerFactoryWithOptions(kube, resync, informers.WithTransform(trim.Object), informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = admission.EgressLabel
	}))
	return f, f.Core().V1().Pods()
}

// New wires the informers; Run starts the work. It fails when an informer no longer takes
// handlers (it was stopped): the controller would never hear of that kind of object.
func New(o Options) (*Controller, error) {
	c := &Controller{o: o,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "service-gateway"}),
		services: o.Services.Lister(), nodes: o.Nodes.Lister(), slices: o.EndpointSlices.Lister(), pods: o.EgressPods.Lister(),
		synced: []cache.InformerSynced{o.Services.Informer().HasSynced, o.Nodes.Informer().HasSynced,
			o.EndpointSlices.Informer().HasSynced, o.EgressPods.Informer().HasSynced},
		byUID: map[string]types.NamespacedName{}, ips: map[string]string{}, removed: map[string]bool{}, egress: map[string]bool{}}
	uo := o.Updater
	uo.Azure = o.Azure
	uo.Callbacks = updater.Callbacks{InboundReady: c.inboundReady, Removed: c.serviceRemoved, Failed: c.serviceFailed}
	c.u = updater.New(uo)

	svcKey := func(obj any) {
		if s, ok := tombstone.As[*v1.Service](obj); ok {
			c.queue.Add("svc/" + s.Namespace + "/" + s.Name)
		}
	}
	var errs []error
	add := func(what string, inf cache.SharedIndexInformer, h cache.ResourceEventHandler) {
		if _, err := inf.AddEventHandler(h); err != nil {
			errs = append(errs, fmt.Errorf("service gateway: watching %s: %w", what, err))
		}
	}
	add("services", o.Services.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: svcKey,
		UpdateFunc: func(_, n any) { svcKey(n) }, DeleteFunc: svcKey})
	sliceKey := func(obj any) {
		if s, ok := tombstone.As[*discoveryv1.EndpointSlice](obj); ok {
			if name := s.Labels[discoveryv1.LabelServiceName]; name != "" {
				c.queue.Add("svc/" + s.Namespace + "/" + name)
			}
		}
	}
	add("endpoint slices", o.EndpointSlices.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: sliceKey,
		UpdateFunc: func(_, n any) { sliceKey(n) }, DeleteFunc: sliceKey})
	// A node address change moves every address on it: recompute all services.
	add("nodes", o.Nodes.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: func(any) { c.queue.Add("nodes") },
		UpdateFunc: func(o, n any) {
			if !addressesEqual(o.(*v1.Node), n.(*v1.Node)) {
				c.queue.Add("nodes")
			}
		}, DeleteFunc: func(any) { c.queue.Add("nodes") }})
	podKey := func(obj any) {
		if p, ok := tombstone.As[*v1.Pod](obj); ok {
			if id, valid := admission.EgressIdentity(p); valid {
				c.queue.Add("egress/" + id)
			} else if id != "" || p.Labels[admission.EgressLabel] != "" {
				c.o.Recorder.Eventf(p, v1.EventTypeWarning, ReasonEgress, "Egress label %s=%q is not a valid egress identity (lower-case letters, digits, '.', '_', '-'; not %s): the pod gets no NAT gateway",
					admission.EgressLabel, p.Labels[admission.EgressLabel], updater.ReservedEgress)
			}
		}
	}
	add("egress pods", o.EgressPods.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: podKey,
		UpdateFunc: func(o, n any) {
			if op := o.(*v1.Pod); op.Labels[admission.EgressLabel] != n.(*v1.Pod).Labels[admission.EgressLabel] {
				podKey(op) // the old identity loses the pod
			}
			podKey(n)
		}, DeleteFunc: podKey})
	if err := errors.Join(errs...); err != nil {
		c.queue.ShutDown()
		return nil, err
	}
	return c, nil
}

// Updater is the controller's updater (tests, benchmarks).
func (c *Controller) Updater() *updater.Updater { return c.u }

// Run waits for the caches, rebuilds the Azure side from Azure (retrying until the gateway
// can be read), seeds the cluster side, then runs the updater and the workers.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Steps: 100, Cap: 30 * time.Second}
	for {
		err := c.u.Bootstrap(ctx)
		if err == nil {
			break
		}
		d := backoff.Step()
		klog.ErrorS(err, "Cannot read the service gateway; retrying", "gateway", updater.GatewayName, "after", d)
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
	// Seed every service and egress identity before the first pass, so that start-up cleanup
	// only removes what the cluster no longer wants.
	for _, key := range c.allKeys() {
		if err := c.sync(ctx, key); err != nil {
			klog.ErrorS(err, "Initial service gateway sync", "key", key)
			c.queue.AddRateLimited(key)
		}
	}
	c.mu.Lock()
	c.started = true
	c.mu.Unlock()
	go c.u.Run(ctx)
	c.u.Trigger()
	for i := 0; i < workers; i++ {
		go wait.UntilWithContext(ctx, c.worker, time.Second)
	}
	<-ctx.Done()
}

func (c *Controller) allKeys() []string {
	var keys []string
	svcs, _ := c.services.List(labels.Everything())
	for _, s := range svcs {
		keys = append(keys, "svc/"+s.Namespace+"/"+s.Name)
	}
	pods, _ := c.pods.List(labels.Everything())
	seen := map[string]bool{}
	for _, p := range pods {
		if id, ok := admission.EgressIdentity(p); ok && !seen[id] {
			seen[id] = true
			keys = append(keys, "egress/"+id)
		}
	}
	// Egress identities registered before a restart whose pods are all gone.
	for n, s := range c.u.Tracker().Applied() {
		if s.Kind == dt.Outbound && !seen[n] {
			keys = append(keys, "egress/"+n)
		}
	}
	return keys
}

func (c *Controller) worker(ctx context.Context) {
	for {
		key, quit := c.queue.Get()
		if quit {
			return
		}
		err := c.sync(ctx, key)
		if err != nil {
			klog.ErrorS(err, "Service gateway sync failed", "key", key)
			c.queue.AddRateLimited(key)
		} else {
			c.queue.Forget(key)
		}
		c.queue.Done(key)
	}
}

func (c *Controller) sync(ctx context.Context, key string) error {
	kind, rest, _ := strings.Cut(key, "/")
	switch kind {
	case "svc":
		ns, name, _ := strings.Cut(rest, "/")
		return c.syncService(ctx, ns, name)
	case "egress":
		return c.syncEgress(rest)
	case "nodes":
		for _, k := range c.allKeys() {
			if strings.HasPrefix(k, "svc/") {
				c.queue.Add(k)
			}
		}
		return nil
	case "status":
		return c.syncStatus(ctx, rest)
	case "removed":
		return c.syncRemoved(ctx, rest)
	}
	return nil
}

func (c *Controller) syncEgress(id string) error {
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		return err
	}
	var mine []*v1.Pod
	for _, p := range pods {
		if got, ok := admission.EgressIdentity(p); ok && got == id {
			mine = append(mine, p)
		}
	}
	c.u.SetEgress(id, admission.EgressMembers(mine))
	return nil
}

func (c *Controller) syncService(ctx context.Context, ns, name string) error {
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		// Gone without our finalizer (removed by hand): withdraw whatever we had for it.
		c.mu.Lock()
		var gone []string
		for uid, nn := range c.byUID {
			if nn.Namespace == ns && nn.Name == name {
				gone = append(gone, uid)
			}
		}
		c.mu.Unlock()
		for _, uid := range gone {
			c.u.DeleteInbound(uid)
		}
		return nil
	}
	if err != nil {
		return err
	}
	uid := strings.ToLower(string(svc.UID))
	c.mu.Lock()
	c.byUID[uid] = types.NamespacedName{Namespace: ns, Name: name}
	c.mu.Unlock()
	eps, err := c.slices.EndpointSlices(ns).List(labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name}))
	if err != nil {
		return err
	}
	r := admission.Admit(svc, eps)
	if !r.Wanted {
		if hasFinalizer(svc) {
			c.u.DeleteInbound(uid)
			c.mu.Lock()
			removed := c.removed[uid]
			c.mu.Unlock()
			if removed { // the updater already reported the resources gone
				return c.syncRemoved(ctx, uid)
			}
		}
		return nil
	}
	if len(r.Rejected) > 0 {
		c.o.Recorder.Eventf(svc, v1.EventTypeWarning, ReasonRejected, "Not supported with container-based load balancing (service gateway): %s. The service's Azure resources are left unchanged; fix or remove the option",
			strings.Join(r.Rejected, "; "))
		return nil
	}
	if len(r.Ignored) > 0 {
		c.o.Recorder.Eventf(svc, v1.EventTypeWarning, ReasonIgnored, "Ignored with container-based load balancing (service gateway): %s", strings.Join(r.Ignored, ", "))
	}
	if r.Pending != "" {
		klog.V(2).InfoS("Service gateway spec pending", "service", klog.KObj(svc), "reason", r.Pending)
		// The port needs a ready endpoint to resolve, the members do not: a service already in
		// the gateway whose last pods went away keeps its spec and loses their addresses, which
		// would otherwise keep receiving traffic until a pod is ready again. (When the
		// EndpointSlice goes from some ready endpoints straight to none, no update in between
		// resolves the port.)
		nodeIPs, err := c.nodeIPs()
		if err != nil {
			return err
		}
		c.u.SetInboundMembers(uid, admission.Members(eps, nodeIPs))
		return nil
	}
	if !hasFinalizer(svc) {
		if err := c.addFinalizer(ctx, svc); err != nil {
			return err
		}
	}
	nodeIPs, err := c.nodeIPs()
	if err != nil {
		return err
	}
	c.mu.Lock()
	delete(c.removed, uid)
	ip := c.ips[uid]
	c.mu.Unlock()
	c.u.SetInbound(uid, r.Spec, admission.Members(eps, nodeIPs))
	if ip != "" && !statusHas(svc, ip) {
		c.queue.Add("status/" + uid)
	}
	return nil
}

func (c *Controller) nodeIPs() (map[string][]string, error) {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, n := range nodes {
		for _, a := range n.Status.Addresses {
			if a.Type == v1.NodeInternalIP {
				out[n.Name] = append(out[n.Name], a.Address)
			}
		}
	}
	return out, nil
}

// Updater callbacks: they only queue work (the updater's worker must not wait on the API).

func (c *Controller) inboundReady(uid, ip string) {
	c.mu.Lock()
	c.ips[uid] = ip
	c.mu.Unlock()
	c.queue.Add("status/" + uid)
}

func (c *Controller) serviceRemoved(name string, kind dt.Kind) {
	if kind != dt.Inbound {
		klog.InfoS("Egress identity removed from the service gateway", "identity", name)
		return
	}
	c.mu.Lock()
	c.removed[name] = true
	delete(c.ips, name)
	c.mu.Unlock()
	c.queue.Add("removed/" + name)
}

func (c *Controller) serviceFailed(name string, kind dt.Kind, err error) {
	if kind != dt.Inbound {
		klog.ErrorS(err, "Egress identity resources failed (retried)", "identity", name)
		return
	}
	if svc := c.serviceOf(name); svc != nil {
		c.o.Recorder.Eventf(svc, v1.EventTypeWarning, ReasonFailed, "Writing the service gateway resources failed (retried): %v", err)
	}
}

func (c *Controller) serviceOf(uid string) *v1.Service {
	c.mu.Lock()
	nn, ok := c.byUID[uid]
	c.mu.Unlock()
	if !ok {
		return nil
	}
	svc, err := c.services.Services(nn.Namespace).Get(nn.Name)
	if err != nil || strings.ToLower(string(svc.UID)) != uid {
		return nil
	}
	return svc
}

// syncStatus writes the public IP into the Service's status.
func (c *Controller) syncStatus(ctx context.Context, uid string) error {
	c.mu.Lock()
	ip := c.ips[uid]
	c.mu.Unlock()
	svc := c.serviceOf(uid)
	if svc == nil || ip == "" || !admission.Wants(svc) || statusHas(svc, ip) {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"loadBalancer": map[string]any{"ingress": []map[string]any{{"ip": ip}}}}})
	if _, err := c.o.Kube.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("service %s/%s status: %w", svc.Namespace, svc.Name, err)
	}
	c.o.Recorder.Eventf(svc, v1.EventTypeNormal, ReasonReady, "Load balancer %s with public IP %s is registered with the service gateway", uid, ip)
	return nil
}

// syncRemoved clears the status and drops the finalizer of a Service whose resources are gone.
func (c *Controller) syncRemoved(ctx context.Context, uid string) error {
	svc := c.serviceOf(uid)
	if svc == nil || admission.Wants(svc) {
		return nil
	}
	if len(svc.Status.LoadBalancer.Ingress) > 0 && svc.DeletionTimestamp == nil {
		patch := []byte(`{"status":{"loadBalancer":{"ingress":null}}}`)
		if _, err := c.o.Kube.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
			return err
		}
	}
	if hasFinalizer(svc) {
		if err := c.removeFinalizer(ctx, svc); err != nil {
			return err
		}
		c.o.Recorder.Eventf(svc, v1.EventTypeNormal, ReasonRemoved, "Load balancer, public IP and service gateway registration %s removed", uid)
	}
	c.mu.Lock()
	delete(c.removed, uid)
	delete(c.byUID, uid)
	c.mu.Unlock()
	return nil
}

func (c *Controller) addFinalizer(ctx context.Context, svc *v1.Service) error {
	return c.patchFinalizers(ctx, svc, append(append([]string{}, svc.Finalizers...), Finalizer))
}

func (c *Controller) removeFinalizer(ctx context.Context, svc *v1.Service) error {
	var keep []string
	for _, f := range svc.Finalizers {
		if f != Finalizer {
			keep = append(keep, f)
		}
	}
	return c.patchFinalizers(ctx, svc, keep)
}

// patchFinalizers writes the list guarded by the resourceVersion (a conflict is retried by the
// queue with the fresh object).
func (c *Controller) patchFinalizers(ctx context.Context, svc *v1.Service, fins []string) error {
	if fins == nil {
		fins = []string{}
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": fins, "resourceVersion": svc.ResourceVersion}})
	_, err := c.o.Kube.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("service %s/%s finalizers: %w", svc.Namespace, svc.Name, err)
	}
	return nil
}

func hasFinalizer(svc *v1.Service) bool {
	for _, f := range svc.Finalizers {
		if f == Finalizer {
			return true
		}
	}
	return false
}

func statusHas(svc *v1.Service, ip string) bool {
	in := svc.Status.LoadBalancer.Ingress
	return len(in) == 1 && in[0].IP == ip
}

func addressesEqual(a, b *v1.Node) bool {
	if len(a.Status.Addresses) != len(b.Status.Addresses) {
		return false
	}
	for i := range a.Status.Addresses {
		if a.Status.Addresses[i] != b.Status.Addresses[i] {
			return false
		}
	}
	return true
}
