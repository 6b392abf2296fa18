package loadbalancer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"

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
	rgs := map[string]bool{strings.ToLower(l.cfg.ResourceGroup): true}
	for _, svc := range svcs {
		rgs[strings.ToLower(plan.PublicIPResourceGroup(l.cfg, plan.Lenient(svc)))] = true
	}
	names := make([]string, 0, len(rgs))
	for rg := range rgs {
		names = append(names, rg)
	}
	sort.Strings(names)
	for _, rg := range names {
		if _, err := l.refreshPIPs(ctx, rg); err != nil {
			errs = append(errs, fmt.Errorf("public IPs of %s: %w", rg, err))
			continue
		}
		parts = append(parts, fmt.Sprintf("public IPs %s: %d", rg, l.opts.PublicIPs.ExternalChanges(rg)))
	}
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	parts = append(parts, "pool members: "+hex.EncodeToString(refs.Sum(nil))[:16])
	return strings.Join(parts, ", "), nil
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
