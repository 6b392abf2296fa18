package loadbalancer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/dryrun"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/plan"
)

// Auditor finds where Azure no longer matches what a service asks for and repairs it, with the
// reconcile the service controller runs: first on a dry-run twin of the implementation (same
// planners, reading Azure through the same writers' caches, recording instead of writing), so
// a service in step costs no write and no lock; then, when the twin recorded writes, on the
// real implementation after the Service was re-read from the API server under the service's
// lock (see serviceLocks).
type Auditor struct {
	lb *LoadBalancer
	// twins are dry-run implementations, one per concurrent audit (each has its own recorder).
	twins chan *twin
}

type twin struct {
	lb  *LoadBalancer
	rec *dryrun.Recorder
}

// NewAuditor builds an auditor of lb, which was built with o, for up to n concurrent checks and
// repairs (each holds a twin while it plans).
func NewAuditor(o BuildOptions, lb *LoadBalancer, n int) (*Auditor, error) {
	if lb == nil {
		return nil, errors.New("loadbalancer: the auditor needs the load balancer implementation")
	}
	n = max(n, 1)
	a := &Auditor{lb: lb, twins: make(chan *twin, n)}
	for range n {
		rec := dryrun.NewRecorder()
		to := o
		to.DryRun, to.Recorder = rec, dryrun.Discard{}
		// The twins look in the groups the real implementation recorded, this process's too.
		to.PIPGroups = lb.opts.PIPGroups
		parts, err := Build(to)
		if err != nil {
			return nil, fmt.Errorf("loadbalancer: building the audit's dry-run implementation: %w", err)
		}
		a.twins <- &twin{lb: parts.LoadBalancer, rec: rec}
	}
	return a, nil
}

// Confirm re-reads a service from the API server before a repair. It returns the live
// Service, or nil and the reason why it must not be repaired (gone, being deleted, no longer
// of type LoadBalancer or served here ...).
type Confirm func(ctx context.Context) (live *v1.Service, skip string, err error)

// AuditResult is what one audit of a service found and did.
type AuditResult struct {
	// Drift are the writes the reconcile would make: empty when Azure is in step.
	Drift []dryrun.Write
	// Repaired: the reconcile ran on the real implementation and succeeded.
	Repaired bool
	// Skipped says why drift was not repaired (the service was deleted or changed meanwhile).
	Skipped string
}

// Audit checks svc and, when it drifted, repairs it (Check, then Repair).
func (a *Auditor) Audit(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node, confirm Confirm) (AuditResult, error) {
	drift, err := a.Check(ctx, clusterName, svc, nodes)
	if err != nil || len(drift) == 0 {
		return AuditResult{Drift: drift}, err
	}
	return a.Repair(ctx, clusterName, svc, nodes, confirm)
}

// Check runs the service's reconcile (svc as the informer has it; nodes as the service
// controller would pass them) on a twin and returns the writes it would make: none when Azure
// is in step. It takes no lock and writes nothing.
func (a *Auditor) Check(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) ([]dryrun.Write, error) {
	return a.plan(ctx, clusterName, svc, nodes)
}

// Repair takes the service's lock, checks again (the service controller may have fixed it
// meanwhile), confirms the service live and repairs it with the real reconcile. Repairs of
// several services run concurrently share the writers' batches.
func (a *Auditor) Repair(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node, confirm Confirm) (AuditResult, error) {
	unlock, err := a.lb.locks.lock(ctx, svc.UID)
	if err != nil {
		return AuditResult{}, err
	}
	defer unlock()
	drift, err := a.plan(ctx, clusterName, svc, nodes)
	if err != nil || len(drift) == 0 {
		return AuditResult{Drift: drift}, err
	}
	live, skip, err := confirm(ctx)
	if err != nil {
		return AuditResult{Drift: drift}, fmt.Errorf("re-reading the service: %w", err)
	}
	if live == nil {
		return AuditResult{Drift: drift, Skipped: skip}, nil
	}
	if live.ResourceVersion != svc.ResourceVersion {
		// The service changed since the informer saw it: what drifted is measured against what
		// it asks for now.
		if drift, err = a.plan(ctx, clusterName, live, nodes); err != nil || len(drift) == 0 {
			return AuditResult{Drift: drift}, err
		}
	}
	if _, err := a.lb.ensureService(ctx, clusterName, live, nodes); err != nil {
		return AuditResult{Drift: drift}, fmt.Errorf("repairing: %w", err)
	}
	return AuditResult{Drift: drift, Repaired: true}, nil
}

// plan runs the service's reconcile on a twin and returns the writes it recorded.
func (a *Auditor) plan(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) ([]dryrun.Write, error) {
	var t *twin
	select {
	case t = <-a.twins:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { a.twins <- t }()
	t.rec.Reset()
	t.rec.SetActor("service " + svc.Namespace + "/" + svc.Name)
	_, err := t.lb.ensureService(ctx, clusterName, svc, nodes)
	if err != nil {
		return t.rec.Writes(), fmt.Errorf("planning: %w", err)
	}
	return t.rec.Writes(), nil
}

// Refresh makes the audits that follow see Azure as it is now: the cluster's load balancers
// and the NSG are read again (one GET each), and the public IP lists of the services' resource
// groups listed again unless they are a few seconds old, so drift made by someone else shows.
// It returns a fingerprint, readable in logs, of the changes made by others as the writers and
// the public IP lists count them (Writer.ExternalChanges, ListCache.ExternalChanges), and of
// the pools' read-only back-references, which Azure may change without a new ETag: when it is
// the same as at a pass that found everything in step, nothing but this CCM changed Azure
// since. The CCM's own writes (a burst of new services) do not move it.
func (a *Auditor) Refresh(ctx context.Context, clusterName string, svcs []*v1.Service) (string, error) {
	l := a.lb
	var parts []string
	refs := sha256.New()
	var errs []error
	for _, c := range l.clusters(clusterName) {
		for _, internal := range []bool{false, true} {
			w := l.lbWriter(c, c.LBName(internal))
			w.Invalidate()
			lb, _, err := w.PeekETag(ctx)
			if err != nil {
				errs = append(errs, fmt.Errorf("load balancer %s: %w", c.LBName(internal), err))
				continue
			}
			parts = append(parts, fmt.Sprintf("lb %s: %d", strings.ToLower(c.LBName(internal)), w.ExternalChanges()))
			writeBackReferences(refs, lb)
		}
	}
	if l.cfg.SecurityGroupName != "" {
		w := l.nsgWriter()
		w.Invalidate()
		if _, _, err := w.PeekETag(ctx); err != nil {
			errs = append(errs, fmt.Errorf("network security group %s: %w", l.cfg.SecurityGroupName, err))
		} else {
			parts = append(parts, fmt.Sprintf("nsg: %d", w.ExternalChanges()))
		}
	}
	for _, rg := range a.groups(ctx, svcs) {
		if _, err := l.refreshPIPs(ctx, rg); err != nil && !arm.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("public IPs of %s: %w", rg, err))
			continue
		}
		parts = append(parts, fmt.Sprintf("public IPs %s: %d", strings.ToLower(rg), l.opts.PublicIPs.ExternalChanges(rg)))
	}
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	parts = append(parts, "pool members: "+hex.EncodeToString(refs.Sum(nil))[:16])
	return strings.Join(parts, ", "), nil
}

// groups are the resource groups where public IPs of the cluster may be: the base groups, the
// recorded ones and those the services name.
func (a *Auditor) groups(ctx context.Context, svcs []*v1.Service) []string {
	l := a.lb
	named := make([]string, 0, len(svcs))
	for _, svc := range svcs {
		named = append(named, plan.PublicIPResourceGroup(l.cfg, plan.Lenient(svc)))
	}
	return plan.PublicIPGroups(l.cfg, l.opts.PIPGroups.Groups(ctx), named...)
}

// Gone reports whether the service of a k8s-azure-service entry (namespace/name) is gone for
// good: no public IP is used for it any more.
type Gone func(ctx context.Context, key string) (bool, error)

// SweepResult is what a sweep released.
type SweepResult struct {
	// Unbound public IPs lost gone services from their service tag and stay (other services
	// use them, or they are still attached); Deleted ones were deleted.
	Unbound, Deleted int
	// Names are the public IPs changed, "<resource group>/<name>".
	Names []string
}

// SweepPublicIPs releases the public IPs owned by the cluster (its name tag and a service tag)
// that no service uses any more, in every group where the cluster's public IPs may be: the
// gone services (gone asks, once per entry) leave their service tags, and a public IP left
// without a service and attached to nothing is deleted. This catches what the service paths
// could not release (a deletion that could not list a group, public IPs left by earlier
// versions). svcs are the services the audit serves (their groups are looked in); the lists
// are those Refresh read.
func (a *Auditor) SweepPublicIPs(ctx context.Context, clusterName string, svcs []*v1.Service, gone Gone) (SweepResult, error) {
	l := a.lb
	c := l.cluster(clusterName)
	listed, skipped, err := l.listGroups(ctx, a.groups(ctx, svcs), nil)
	if err != nil {
		return SweepResult{}, err
	}
	var res SweepResult
	errs := []error{skipped}
	decided := map[string]bool{}
	for _, cand := range plan.SweepCandidates(c, listed) {
		goneKeys := map[string]bool{}
		for _, key := range plan.PIPServices(cand.PIP) {
			g, seen := decided[key]
			if !seen {
				if g, err = gone(ctx, key); err != nil {
					errs = append(errs, fmt.Errorf("service %s of public IP %s/%s: %w", key, cand.RG, str(cand.PIP.Name), err))
					continue
				}
				decided[key] = g
			}
			if g {
				goneKeys[key] = true
			}
		}
		if !plan.SweepDue(c, cand.PIP, goneKeys) {
			continue // in use, or attached with no service left
		}
		name := str(cand.PIP.Name)
		w := l.pipWriter(cand.RG, name)
		// The list may be a few seconds old: read the public IP again and decide on that.
		w.Invalidate()
		written := l.pipWriting(cand.RG, name)
		stored, err := w.Submit(ctx, func(cur *armnetwork.PublicIPAddress) (*armnetwork.PublicIPAddress, error) {
			return plan.SweepPIP(c, cur, goneKeys), nil
		})
		written(stored, err)
		if err != nil {
			errs = append(errs, fmt.Errorf("releasing public IP %s/%s: %w", cand.RG, name, err))
			continue
		}
		if stored == nil {
			res.Deleted++
		} else if len(plan.PIPServices(stored)) < len(plan.PIPServices(cand.PIP)) {
			res.Unbound++
		} else {
			continue
		}
		res.Names = append(res.Names, cand.RG+"/"+name)
		klog.InfoS("Released a public IP no service uses", "publicIP", cand.RG+"/"+name, "deleted", stored == nil,
			"goneServices", slices.Sorted(maps.Keys(goneKeys)))
	}
	return res, errors.Join(errs...)
}

// writeBackReferences adds the NIC-based members of the load balancer's pools to a fingerprint.
func writeBackReferences(w io.Writer, lb *armnetwork.LoadBalancer) {
	if lb == nil || lb.Properties == nil {
		return
	}
	for _, p := range lb.Properties.BackendAddressPools {
		if p == nil || p.Properties == nil {
			continue
		}
		ids := make([]string, 0, len(p.Properties.BackendIPConfigurations))
		for _, r := range p.Properties.BackendIPConfigurations {
			if r != nil && r.ID != nil {
				ids = append(ids, strings.ToLower(*r.ID))
			}
		}
		slices.Sort(ids)
		fmt.Fprintf(w, "pool %s %s\n", strings.ToLower(str(p.Name)), strings.Join(ids, ","))
	}
}
