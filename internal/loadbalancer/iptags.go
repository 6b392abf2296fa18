package loadbalancer

import (
	"context"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/plan"
)

// Event reasons of azure-pip-ip-tags.
const (
	// ReasonPublicIPRecreated: a managed public IP is deleted and created again because its IP
	// tags changed (ARM cannot change them in place); the service's address changes.
	ReasonPublicIPRecreated = "PublicIPRecreated"
	// ReasonIPTagsNotChanged: the IP tags cannot be changed (shared or user-named public IP,
	// from a prefix, or a type other than FirstPartyUsage with in-place mutation).
	ReasonIPTagsNotChanged = "IPTagsNotChanged"
)

// recreatePIPs carries out the IP tag decisions of the plans: a refused change is a Warning
// event; a public IP to re-create leaves its load balancer frontend and is deleted, so the next
// plan creates it anew with the new IP tags (as the existing provider does). Every step is
// idempotent: after a crash the next reconcile finds the same decision and goes on.
func (l *LoadBalancer) recreatePIPs(ctx context.Context, c *plan.Cluster, s *plan.Service, rg string, plans []plan.PublicIPPlan) (bool, error) {
	recreated := false
	for _, p := range plans {
		switch p.IPTags.Action {
		case plan.IPTagsRefuse:
			l.warn(s.Svc, ReasonIPTagsNotChanged, p.IPTags.Reason)
			continue
		case plan.IPTagsRecreate:
		default:
			continue
		}
		l.warn(s.Svc, ReasonPublicIPRecreated, p.IPTags.Reason)
		if lbID := plan.LBOfFrontend(p.Existing); lbID != "" {
			held := false
			for _, cl := range l.clusters(c.ClusterName) {
				name := cl.LBName(false)
				if strings.EqualFold(cl.LBID(name), lbID) {
					held = true
					if err := l.removeFromLB(ctx, cl, name, s, "its public IP is re-created with new IP tags"); err != nil {
						return false, fmt.Errorf("re-creating public IP %s: %w", p.Name, err)
					}
				}
			}
			if !held {
				return false, fmt.Errorf("public IP %s is attached to %s, not to a load balancer of the cluster; its IP tags are not changed", p.Name, lbID)
			}
		}
		// Detaching gave the public IP a new ETag: read it again.
		w := l.pipWriter(rg, p.Name)
		w.Invalidate()
		key := s.Key()
		written := l.pipWriting(rg, p.Name)
		stored, err := w.Submit(ctx, func(cur *armnetwork.PublicIPAddress) (*armnetwork.PublicIPAddress, error) {
			if cur == nil {
				return nil, nil
			}
			if d := plan.DecideIPTags(c, s, cur); d.Action != plan.IPTagsRecreate || !plan.IsManagedPIP(c, cur) ||
				len(plan.PIPServices(cur)) != 1 || plan.PIPServices(cur)[0] != key {
				return cur, nil // someone else took it meanwhile: keep it
			}
			return nil, nil
		})
		written(stored, err)
		if err != nil {
			return false, fmt.Errorf("deleting public IP %s to re-create it with new IP tags: %w", p.Name, err)
		}
		klog.InfoS("Deleted a public IP to re-create it with new IP tags", "service", key, "publicIP", p.Name)
		recreated = true
	}
	return recreated, nil
}
