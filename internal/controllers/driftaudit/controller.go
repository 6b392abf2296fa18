// Package driftaudit is the drift audit controller: every period it checks every
// LoadBalancer service the CCM serves against Azure and repairs what someone else changed — a
// rule deleted in the portal, a probe changed by a script, an NSG rule removed by a policy, a
// backend pool member dropped, a frontend pointed at another public IP — with the same planners
// and writers as the service controller.
//
// A pass reads each cluster load balancer and the NSG once (and the public IP lists), then runs
// each service's reconcile on a dry-run twin (loadbalancer.Auditor): a service in step costs
// no write. A service that drifted is read again from the API server, under the lock its
// deletion also takes, and repaired only if it still exists with the same UID, is not being
// deleted and is still a LoadBalancer served here; so a repair never resurrects a deleted
// service (see loadbalancer.serviceLocks). When nobody but this CCM changed Azure since the
// last pass that found everything in step (Auditor.Refresh), the pass plans nothing at all:
// what the CCM wrote meanwhile, for services and nodes that changed, the service controller
// planned from the same models. So a burst of new services, whose writes keep changing every
// ETag, is not planned a second time by the audit; a full pass still runs every FullEvery
// passes.
package driftaudit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/changes"
	"github.com/azure-ccm/azure-ccm/internal/dryrun"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/membership"
)

// Event reasons.
const (
	// ReasonDriftRepaired: Azure no longer matched the service and the audit put it back.
	ReasonDriftRepaired = "DriftRepaired"
	// ReasonDriftRepairFailed: the repair's reconcile failed (retried at the next pass).
	ReasonDriftRepairFailed = "DriftRepairFailed"
)

// Auditor is what the controller needs of the load balancer implementation
// (loadbalancer.Auditor).
type Auditor interface {
	Refresh(ctx context.Context, clusterName string, svcs []*v1.Service) (string, error)
	Check(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) ([]dryrun.Write, error)
	Repair(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node, confirm loadbalancer.Confirm) (loadbalancer.AuditResult, error)
	SweepPublicIPs(ctx context.Context, clusterName string, svcs []*v1.Service, gone loadbalancer.Gone) (loadbalancer.SweepResult, error)
}

// Options are what the controller is built from. Every field but Now, Workers and FullEvery
// is required.
type Options struct {
	ClusterName string
	Auditor     Auditor
	// Kube re-reads a drifted service from the API server before it is repaired.
	Kube      kubernetes.Interface
	Services  corelisters.ServiceLister
	Nodes     corelisters.NodeLister
	HasSynced []cache.InformerSynced
	Recorder  record.EventRecorder
	// Period between the starts of two passes.
	Period time.Duration
	// Workers check services concurrently (default 4).
	Workers int
	// Repairs bounds the repairs run at once (default 16). The services that drifted are all
	// repaired together, after every service was checked, so repairs of services on one load
	// balancer or NSG share its writes (group commit).
	Repairs int
	// FullEvery forces a pass that plans every service after this many passes skipped as
	// unchanged (default 10), should something the fingerprint does not cover have moved (an
	// edit that left every ETag as it was, a reconcile that ended without reaching Azure).
	FullEvery int
	Now       func() time.Time
}

// Controller runs the passes.
type Controller struct {
	o Options
	// lastClean is the fingerprint of the last pass that found everything in step.
	lastClean string
	skipped   int
}

// New checks the options and returns the controller.
func New(o Options) (*Controller, error) {
	if o.Auditor == nil || o.Kube == nil || o.Services == nil || o.Nodes == nil || o.Recorder == nil || o.Period <= 0 {
		return nil, errors.New("driftaudit: Auditor, Kube, Services, Nodes, Recorder and a positive Period are required")
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.Repairs <= 0 {
		o.Repairs = DefaultRepairs
	}
	if o.FullEvery <= 0 {
		o.FullEvery = 10
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Controller{o: o}, nil
}

// Run waits for the informers, then runs a pass every period (the first one period after the
// start: at start the service controller reconciles every service anyway).
func (c *Controller) Run(ctx context.Context) {
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.o.HasSynced...) {
		return
	}
	klog.InfoS("Drift audit started", "period", c.o.Period, "workers", c.o.Workers)
	t := time.NewTicker(c.o.Period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.Pass(ctx)
		}
	}
}

// PassResult sums up one pass.
type PassResult struct {
	// Unchanged: nobody else changed Azure since the last pass in step; no service was planned.
	Unchanged bool
	Audited   int
	// Drifted services, Repaired ones, Skipped ones (gone or changed meanwhile) and Errors.
	Drifted, Repaired, Skipped, Errors int
	// Released public IPs: owned by the cluster, no service left using them (unbound or
	// deleted).
	Released int
}

// Pass audits every owned service once.
func (c *Controller) Pass(ctx context.Context) PassResult {
	start := c.o.Now()
	defer func() {
		passDuration.Observe(c.o.Now().Sub(start).Seconds())
		lastPass.Set(float64(c.o.Now().Unix()))
	}()
	var res PassResult
	all, err := c.o.Services.List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "Drift audit: listing services")
		passes.WithLabelValues("error").Inc()
		return PassResult{Errors: 1}
	}
	var svcs []*v1.Service
	for _, s := range all {
		if Owned(s) == "" {
			svcs = append(svcs, s)
		}
	}
	sort.Slice(svcs, func(i, j int) bool { return svcs[i].Namespace+"/"+svcs[i].Name < svcs[j].Namespace+"/"+svcs[j].Name })
	nodeList, err := c.o.Nodes.List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "Drift audit: listing nodes")
		passes.WithLabelValues("error").Inc()
		return PassResult{Errors: 1}
	}
	nodes := membership.ServiceControllerNodes(nodeList)
	azure, err := c.o.Auditor.Refresh(ctx, c.o.ClusterName, svcs)
	if err != nil {
		klog.ErrorS(err, "Drift audit: reading Azure")
		passes.WithLabelValues("error").Inc()
		return PassResult{Errors: 1}
	}
	if azure == c.lastClean && c.skipped < c.o.FullEvery {
		c.skipped++
		passes.WithLabelValues("unchanged").Inc()
		klog.V(4).InfoS("Drift audit: nobody else changed Azure since the last pass in step", "services", len(svcs))
		return PassResult{Unchanged: true}
	}
	if c.lastClean != "" && azure != c.lastClean {
		klog.V(2).InfoS("Drift audit: Azure changed other than by this CCM since the last pass in step; planning every service",
			"then", c.lastClean, "now", azure)
	}
	c.skipped = 0

	// Check every service (no lock, no write), then repair the ones that drifted, together.
	checked := make([]checkResult, len(svcs))
	forEach(ctx, len(svcs), c.o.Workers, func(i int) {
		drift, err := c.o.Auditor.Check(ctx, c.o.ClusterName, svcs[i], nodes)
		checked[i] = checkResult{drift: drift, err: err}
	})
	var drifted []int
	for i, r := range checked {
		res.Audited++
		switch {
		case r.err != nil:
			// Planning failed (an invalid annotation, an ARM read): the service controller
			// reports the same failure on the service.
			res.Errors++
			services.WithLabelValues("error").Inc()
			klog.V(2).InfoS("Drift audit: the service cannot be planned", "service", key(svcs[i]), "err", r.err)
		case len(r.drift) == 0:
			services.WithLabelValues("in_step").Inc()
		default:
			drifted = append(drifted, i)
		}
	}
	var mu sync.Mutex
	forEach(ctx, len(drifted), c.o.Repairs, func(j int) {
		r := c.repairService(ctx, svcs[drifted[j]], nodes)
		mu.Lock()
		defer mu.Unlock()
		if r.err {
			res.Errors++
		}
		if r.skipped {
			res.Skipped++
		}
		if r.drifted {
			res.Drifted++
		}
		if r.repaired {
			res.Repaired++
		}
	})

	// Public IPs owned by the cluster that no service uses any more (left by a deletion that
	// could not reach their group, or by earlier versions).
	swept, err := c.o.Auditor.SweepPublicIPs(ctx, c.o.ClusterName, all, c.gone)
	if n := len(swept.Names); n > 0 {
		res.Released = n
		driftFound.WithLabelValues("public_ip").Add(float64(n))
		driftRepaired.WithLabelValues("public_ip").Add(float64(n))
		klog.InfoS("Drift audit: released public IPs no service uses", "publicIPs", swept.Names, "deleted", swept.Deleted, "unbound", swept.Unbound)
	}
	if err != nil {
		res.Errors++
		klog.ErrorS(err, "Drift audit: releasing public IPs no service uses")
	}

	if res.Drifted == 0 && res.Errors == 0 && res.Skipped == 0 && res.Released == 0 && ctx.Err() == nil {
		c.lastClean = azure
	} else {
		c.lastClean = ""
	}
	result := "in_step"
	switch {
	case res.Errors > 0:
		result = "error"
	case res.Drifted > 0 || res.Released > 0:
		result = "drift"
	}
	passes.WithLabelValues(result).Inc()
	klog.V(2).InfoS("Drift audit pass", "services", res.Audited, "drifted", res.Drifted, "repaired", res.Repaired,
		"skipped", res.Skipped, "releasedPublicIPs", res.Released, "errors", res.Errors, "took", c.o.Now().Sub(start).Round(time.Millisecond))
	return res
}

type checkResult struct {
	drift []dryrun.Write
	err   error
}

type serviceResult struct {
	drifted, repaired, skipped, err bool
}

func key(s *v1.Service) string { return s.Namespace + "/" + s.Name }

// forEach runs f(0..n-1) on up to workers goroutines, until ctx ends.
func forEach(ctx context.Context, n, workers int, f func(i int)) {
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				f(i)
			}
		}()
	}
	for i := range n {
		select {
		case work <- i:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
}

// repairService repairs one service that drifted and reports it in events, logs and metrics.
func (c *Controller) repairService(ctx context.Context, svc *v1.Service, nodes []*v1.Node) serviceResult {
	ar, err := c.o.Auditor.Repair(ctx, c.o.ClusterName, svc, nodes, c.confirm(svc))
	found := countKinds(ar.Drift)
	for k, n := range found {
		driftFound.WithLabelValues(k).Add(float64(n))
	}
	out := serviceResult{drifted: len(ar.Drift) > 0}
	switch {
	case err != nil && len(ar.Drift) > 0:
		// The repair (or the re-read) failed.
		out.err = true
		services.WithLabelValues("error").Inc()
		klog.ErrorS(err, "Drift audit: repair failed", "service", key(svc), "drift", Summary(ar.Drift))
		c.o.Recorder.Eventf(svc, v1.EventTypeWarning, ReasonDriftRepairFailed, "Azure drifted from the service (%s); the repair failed, retried at the next audit: %v",
			Summary(ar.Drift), err)
	case err != nil:
		out.err = true
		services.WithLabelValues("error").Inc()
		klog.V(2).InfoS("Drift audit: the service cannot be planned", "service", key(svc), "err", err)
	case len(ar.Drift) == 0:
		// In step again (the service controller got there first).
		services.WithLabelValues("in_step").Inc()
	case ar.Skipped != "":
		out.skipped = true
		services.WithLabelValues("skipped").Inc()
		klog.InfoS("Drift audit: drift not repaired", "service", key(svc), "reason", ar.Skipped, "drift", Summary(ar.Drift))
	case ar.Repaired:
		out.repaired = true
		services.WithLabelValues("repaired").Inc()
		for k, n := range found {
			driftRepaired.WithLabelValues(k).Add(float64(n))
		}
		klog.InfoS("Drift audit: repaired", "service", key(svc), "drift", Summary(ar.Drift))
		c.o.Recorder.Eventf(svc, v1.EventTypeNormal, ReasonDriftRepaired, "Azure drifted from the service; repaired: %s", Summary(ar.Drift))
	}
	return out
}

// confirm re-reads svc from the API server (not the informer's cache, which can lag behind a
// deletion).
func (c *Controller) confirm(svc *v1.Service) loadbalancer.Confirm {
	return func(ctx context.Context) (*v1.Service, string, error) {
		live, err := c.o.Kube.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, SkipGone, nil
		}
		if err != nil {
			return nil, "", err
		}
		if why := Confirmed(svc, live); why != "" {
			return nil, why, nil
		}
		return live, "", nil
	}
}

// gone says whether the service of a public IP's service tag entry is gone for good: not in the
// informer's cache (or released there), and then not found (or released) on the API server,
// whose answer the cache may lag behind. An entry that is no namespace/name is kept.
func (c *Controller) gone(ctx context.Context, key string) (bool, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil || ns == "" || name == "" {
		return false, nil //nolint:nilerr // not a service's key: the entry is kept
	}
	if s, err := c.o.Services.Services(ns).Get(name); err == nil && !Released(s) {
		return false, nil
	}
	live, err := c.o.Kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return Released(live), nil
}

// countKinds counts the changes of the writes by kind (frontend, rule, probe …).
func countKinds(ws []dryrun.Write) map[string]int {
	out := map[string]int{}
	for _, w := range ws {
		if w.Op == dryrun.Delete || len(w.Changes) == 0 {
			out[kindOfWrite(w)]++
			continue
		}
		for _, ch := range w.Changes {
			out[changes.Kind(w.ResourceType, ch)]++
		}
	}
	return out
}

func kindOfWrite(w dryrun.Write) string {
	return changes.Kind(w.ResourceType, changes.Change{})
}

// maxSummaryItems bounds an event message (the API server cuts messages at 1 KiB).
const maxSummaryItems = 6

// Summary describes the writes of a repair in one line, e.g. "load balancer kubernetes:
// loadBalancingRules a…-TCP-80 added".
func Summary(ws []dryrun.Write) string {
	var items []string
	for _, w := range ws {
		what := resourceKind(w.ResourceType) + " " + w.Name()
		if w.Op != dryrun.Update || len(w.Changes) == 0 {
			items = append(items, what+" "+string(w.Op)+"d")
			continue
		}
		for _, ch := range w.Changes {
			items = append(items, what+": "+changes.Describe(ch))
		}
	}
	items = slices.Compact(items)
	if len(items) > maxSummaryItems {
		items = append(items[:maxSummaryItems], fmt.Sprintf("and %d more", len(items)-maxSummaryItems))
	}
	return strings.Join(items, "; ")
}

// resourceKind names an ARM type for people ("load balancer").
func resourceKind(typ string) string {
	switch typ {
	case dryrun.TypeLoadBalancer:
		return "load balancer"
	case dryrun.TypeSecurityGroup:
		return "network security group"
	case dryrun.TypePublicIP:
		return "public IP"
	case dryrun.TypeRouteTable:
		return "route table"
	case dryrun.TypeInterface:
		return "network interface"
	case dryrun.TypeScaleSetVM:
		return "scale set VM"
	case dryrun.TypeScaleSet:
		return "scale set"
	}
	return typ
}
