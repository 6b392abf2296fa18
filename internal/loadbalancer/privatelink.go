package loadbalancer

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/azureid"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/plan"
	"github.com/azure-ccm/azure-ccm/internal/writer"
)

// Event reasons of private link services.
const (
	ReasonPLSCreated  = "PrivateLinkServiceCreated"
	ReasonPLSUpdated  = "PrivateLinkServiceUpdated"
	ReasonPLSDeleted  = "PrivateLinkServiceDeleted"
	ReasonPLSHandedOn = "PrivateLinkServiceOwnerChanged"
	ReasonPLSRefused  = "PrivateLinkServiceRefused"
)

// MaxPrivateLinksPerLoadBalancer is Azure's limit of private link services on one load
// balancer.
const MaxPrivateLinksPerLoadBalancer = 8

// ensurePrivateLink gives the service's IPv4 frontend on lb the private link service its
// annotations ask for, or removes the one it no longer wants (plan.DecidePrivateLink). The
// frontend exists (the load balancer was written before).
func (l *LoadBalancer) ensurePrivateLink(ctx context.Context, c *plan.Cluster, s *plan.Service, lb *armnetwork.LoadBalancer) error {
	fe := plan.PrivateLinkFrontend(lb, s.LBName())
	if fe == nil || fe.ID == nil {
		if s.Opts.PLS.Create {
			return l.refusePLS(s, plan.ErrPLSNeedsIPv4)
		}
		return nil
	}
	rg := plan.PrivateLinkResourceGroup(l.cfg, s)
	list, err := l.opts.PrivateLinks.Get(ctx, rg)
	if err != nil {
		return fmt.Errorf("listing private link services of %s: %w", rg, err)
	}
	existing := plan.PrivateLinkOf(list, *fe.ID)
	if existing == nil && !s.Opts.PLS.Create {
		return l.recordAlias(ctx, s.Svc, "")
	}
	in := plan.PrivateLinkInput{ClusterName: c.ClusterName, Service: s, FrontendName: str(fe.Name), Existing: existing}
	if existing != nil {
		in.OwnerWants, in.OthersWanting = l.privateLinkWanters(s, lb, fe, plan.PrivateLinkOwner(existing))
	}
	d, err := plan.DecidePrivateLink(in)
	if err != nil {
		return l.refusePLS(s, err)
	}
	lbID := c.LBID(str(lb.Name))
	switch d.Action {
	case plan.PLSWrite:
		if existing == nil && len(plan.PrivateLinksOn(list, lbID)) >= MaxPrivateLinksPerLoadBalancer {
			return l.refusePLS(s, fmt.Errorf("load balancer %s already has %d private link services, Azure's limit", str(lb.Name), MaxPrivateLinksPerLoadBalancer))
		}
		return l.writePrivateLink(ctx, c, s, rg, d.Name, *fe.ID, lbID, existing == nil)
	case plan.PLSHandOver:
		id := azureid.PrivateLinkService(l.cfg.NetworkSubscriptionID(), rg, d.Name)
		stored, err := l.opts.Writers.PrivateLinkServices.For(id).Submit(ctx, func(cur *armnetwork.PrivateLinkService) (*armnetwork.PrivateLinkService, error) {
			return plan.HandOverPrivateLink(cur, c.ClusterName, d.NewOwner)
		})
		l.plsWritten(rg, d.Name, stored, err)
		countPLS("hand_over", err)
		if err != nil {
			return fmt.Errorf("private link service %s: %w", d.Name, err)
		}
		l.event(s.Svc, v1.EventTypeNormal, ReasonPLSHandedOn, fmt.Sprintf("private link service %s is now configured by service %s, which shares the frontend and asks for it", d.Name, d.NewOwner))
		return l.recordAlias(ctx, s.Svc, "")
	case plan.PLSDelete:
		if err := l.deletePrivateLink(ctx, c, s, rg, existing, lbID, "the service no longer asks for it (azure-pls-create)"); err != nil {
			return err
		}
		return l.recordAlias(ctx, s.Svc, "")
	}
	// Shared with the owner service: the alias is the same for every service on the frontend.
	if existing != nil && s.Opts.PLS.Create && existing.Properties != nil {
		return l.recordAlias(ctx, s.Svc, str(existing.Properties.Alias))
	}
	return l.recordAlias(ctx, s.Svc, "")
}

// writePrivateLink creates or updates the PLS name of the service (its NAT subnet's policies
// disabled first, as Azure requires).
func (l *LoadBalancer) writePrivateLink(ctx context.Context, c *plan.Cluster, s *plan.Service, rg, name, frontendID, lbID string, create bool) error {
	subnetName := plan.PrivateLinkSubnet(l.cfg, s)
	subnetID := azureid.Subnet(l.cfg.NetworkSubscriptionID(), l.cfg.VnetRG(), l.cfg.VnetName, subnetName)
	if _, err := l.opts.Writers.Subnets.For(subnetID).Submit(ctx, plan.DisablePrivateLinkPolicies); err != nil {
		countPLS("subnet", err)
		return fmt.Errorf("private link service %s: NAT subnet %s: %w", name, subnetName, err)
	}
	spec := plan.PrivateLinkSpec{ClusterName: c.ClusterName, Location: l.cfg.Location, Owner: s.Key(), Options: s.Opts.PLS,
		FrontendID: frontendID, SubnetID: subnetID, SubnetName: subnetName, Tags: c.TagPolicy.Config}
	w := l.opts.Writers.PrivateLinkServices.For(azureid.PrivateLinkService(l.cfg.NetworkSubscriptionID(), rg, name))
	// Whether this call's mutation changed the PLS, decided by the mutation itself: the writer's
	// put count also moves for other callers' writes in the meantime. Read only after Submit
	// returned without error (the mutation's last run is the one written).
	changed := false
	stored, err := w.Submit(ctx, func(cur *armnetwork.PrivateLinkService) (*armnetwork.PrivateLinkService, error) {
		before := writer.DeepCopy(cur)
		next, err := plan.ApplyPrivateLink(cur, name, spec)
		changed = err == nil && !writer.DeepEqual(before, next)
		return next, err
	})
	l.plsWritten(rg, name, stored, err)
	op := "update"
	if create {
		op = "create"
	}
	countPLS(op, err)
	if err != nil {
		return fmt.Errorf("private link service %s: %w", name, err)
	}
	alias := ""
	if stored != nil && stored.Properties != nil {
		alias = str(stored.Properties.Alias)
	}
	switch {
	case create:
		// The load balancer's frontend now refers to the PLS: its ETag moved.
		l.lbs.For(lbID).Invalidate()
		l.event(s.Svc, v1.EventTypeNormal, ReasonPLSCreated, fmt.Sprintf("created private link service %s (alias %s) on frontend %s", name, alias, azureid.Name(frontendID)))
	case changed:
		l.event(s.Svc, v1.EventTypeNormal, ReasonPLSUpdated, fmt.Sprintf("updated private link service %s to the service's azure-pls-* annotations", name))
	}
	return l.recordAlias(ctx, s.Svc, alias)
}

// deletePrivateLink deletes a managed PLS, its private endpoint connections first, and says on
// the service which connections went.
func (l *LoadBalancer) deletePrivateLink(ctx context.Context, c *plan.Cluster, s *plan.Service, rg string, p *armnetwork.PrivateLinkService, lbID, why string) error {
	name := str(p.Name)
	var conns []string
	_, err := l.opts.Writers.PrivateLinkServices.For(azureid.PrivateLinkService(l.cfg.NetworkSubscriptionID(), rg, name)).Submit(ctx,
		func(cur *armnetwork.PrivateLinkService) (*armnetwork.PrivateLinkService, error) {
			if cur != nil && !plan.ManagedPrivateLink(cur, c.ClusterName) {
				return nil, fmt.Errorf("%w (%s)", plan.ErrPLSNotManaged, name)
			}
			conns = plan.ConnectionNames(cur)
			return nil, nil
		})
	l.plsWritten(rg, name, nil, err)
	countPLS("delete", err)
	if err != nil {
		return fmt.Errorf("deleting private link service %s: %w", name, err)
	}
	l.lbs.For(lbID).Invalidate()
	msg := fmt.Sprintf("deleted private link service %s: %s", name, why)
	if len(conns) > 0 {
		msg += "; private endpoint connections removed: " + strings.Join(conns, ", ")
	}
	l.event(s.Svc, v1.EventTypeNormal, ReasonPLSDeleted, msg)
	return nil
}

// releasePrivateLinks deletes the managed private link services on the frontends that mutate
// removes from lb: Azure refuses to remove a frontend a private link service refers to. A
// user's PLS on such a frontend is left alone and the removal fails with an error saying so.
func (l *LoadBalancer) releasePrivateLinks(ctx context.Context, c *plan.Cluster, s *plan.Service, lb *armnetwork.LoadBalancer,
	mutate writer.Mutation[armnetwork.LoadBalancer], why string) error {
	if lb == nil || lb.Properties == nil || len(lb.Properties.FrontendIPConfigurations) == 0 {
		return nil
	}
	rg := plan.PrivateLinkResourceGroup(l.cfg, s)
	list, err := l.opts.PrivateLinks.Get(ctx, rg)
	if err != nil {
		return fmt.Errorf("listing private link services of %s: %w", rg, err)
	}
	lbID := c.LBID(str(lb.Name))
	held := plan.PrivateLinksOn(list, lbID)
	if len(held) == 0 {
		return nil
	}
	after, err := mutate(writer.DeepCopy(lb))
	if err != nil {
		return nil //nolint:nilerr // the write itself reports it
	}
	for _, feID := range plan.RemovedFrontendIDs(lb, after) {
		p := plan.PrivateLinkOf(held, feID)
		if p == nil {
			continue
		}
		if !plan.ManagedPrivateLink(p, c.ClusterName) {
			return l.refusePLS(s, fmt.Errorf("frontend %s cannot be removed: private link service %s, which this cluster does not manage, refers to it",
				azureid.Name(feID), str(p.Name)))
		}
		if err := l.deletePrivateLink(ctx, c, s, rg, p, lbID, why); err != nil {
			return err
		}
	}
	return nil
}

// privateLinkWanters reads, from the other services on the frontend fe, whether the PLS's owner
// still wants it and which others want one (by service key, sorted).
func (l *LoadBalancer) privateLinkWanters(s *plan.Service, lb *armnetwork.LoadBalancer, fe *armnetwork.FrontendIPConfiguration, owner string) (ownerWants bool, others []string) {
	if l.opts.Services == nil {
		return false, nil
	}
	// The services on the frontend are those whose rules use it: rule names start with the
	// service's a<uid> name.
	var ruleNames []string
	for _, r := range lb.Properties.LoadBalancingRules {
		if r.Properties != nil && r.Properties.FrontendIPConfiguration != nil && strings.EqualFold(str(r.Properties.FrontendIPConfiguration.ID), str(fe.ID)) {
			ruleNames = append(ruleNames, strings.ToLower(str(r.Name)))
		}
	}
	svcs, err := l.opts.Services.List(labels.Everything())
	if err != nil {
		return false, nil
	}
	for _, other := range svcs {
		if other.UID == s.Svc.UID || other.DeletionTimestamp != nil || other.Spec.Type != v1.ServiceTypeLoadBalancer || !plan.ServedHere(other) {
			continue
		}
		prefix := strings.ToLower(naming.ServiceLBName(other.UID))
		on := naming.OwnedByService(naming.ServiceLBName(other.UID), str(fe.Name))
		for _, r := range ruleNames {
			on = on || strings.HasPrefix(r, prefix)
		}
		if !on || !plan.Lenient(other).Opts.PLS.Create {
			continue
		}
		key := naming.ServiceKey(other.Namespace, other.Name)
		if strings.EqualFold(key, owner) {
			ownerWants = true
		} else {
			others = append(others, key)
		}
	}
	slices.Sort(others)
	return ownerWants, others
}

// refusePLS reports a private link service request that cannot be honoured on the service.
func (l *LoadBalancer) refusePLS(s *plan.Service, err error) error {
	countPLS("refused", err)
	l.event(s.Svc, v1.EventTypeWarning, ReasonPLSRefused, err.Error())
	return err
}

// plsWritten keeps the private link service list cache in step with a write of name.
func (l *LoadBalancer) plsWritten(rg, name string, stored *armnetwork.PrivateLinkService, err error) {
	if err != nil {
		l.opts.PrivateLinks.Invalidate(rg)
		return
	}
	l.opts.PrivateLinks.Update(rg, func(items []*armnetwork.PrivateLinkService) []*armnetwork.PrivateLinkService {
		out := make([]*armnetwork.PrivateLinkService, 0, len(items)+1)
		for _, p := range items {
			if p != nil && !strings.EqualFold(str(p.Name), name) {
				out = append(out, p)
			}
		}
		if stored != nil {
			out = append(out, stored)
		}
		return out
	})
}

// recordAlias keeps the service's azure-pls-alias annotation (set by the CCM, so that consumers
// find the alias without the portal) equal to alias ("" removes it).
func (l *LoadBalancer) recordAlias(ctx context.Context, svc *v1.Service, alias string) error {
	if l.opts.Kube == nil || svc.DeletionTimestamp != nil || svc.Annotations[annotations.PLSAlias] == alias {
		return nil
	}
	var value any = alias
	if alias == "" {
		if _, ok := svc.Annotations[annotations.PLSAlias]; !ok {
			return nil
		}
		value = nil // a merge patch deletes the key
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{annotations.PLSAlias: value}}})
	if err != nil {
		return err
	}
	_, err = l.opts.Kube.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		klog.ErrorS(err, "Recording the private link service alias on the service", "service", naming.ServiceKey(svc.Namespace, svc.Name))
		return fmt.Errorf("recording the private link service alias: %w", err)
	}
	return nil
}

// event records an event on the service when a recorder is configured.
func (l *LoadBalancer) event(svc *v1.Service, typ, reason, msg string) {
	if l.opts.Recorder != nil {
		l.opts.Recorder.Event(svc, typ, reason, msg)
	}
}
