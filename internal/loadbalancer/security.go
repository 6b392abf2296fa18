package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/membership"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/plan"
)

// ensureSecurity puts the service's NSG rules in place (want) or takes them out: it gathers
// what the NSG planner needs (destinations, stale addresses, ports other services keep) and
// submits plan.ApplySecurity to the NSG's writer. former are the addresses of public IPs the
// service is releasing: their rules go too, unless someone else holds the address.
func (l *LoadBalancer) ensureSecurity(ctx context.Context, c *plan.Cluster, s *plan.Service, ips, former []netip.Addr, nodes []*v1.Node, want bool) error {
	if l.cfg.SecurityGroupName == "" {
		return errors.New("azure.json securityGroupName is required for LoadBalancer services")
	}
	var nodeAddrs []netip.Addr
	if s.Opts.DisableFloatingIP {
		f := membership.NodeFilter{ExcludeControlPlane: l.cfg.ExcludeMasters(), ResourceGroup: l.cfg.ResourceGroup}
		for _, n := range f.Eligible(nodes) {
			nodeAddrs = append(nodeAddrs, membership.NodeAddresses(n, naming.IPv4)...)
			nodeAddrs = append(nodeAddrs, membership.NodeAddresses(n, naming.IPv6)...)
		}
	}
	dsts := plan.SecurityDestinations(s, ips, want, nodeAddrs)
	stale := plan.StaleDestinations(s, dsts, former, nil)
	if len(stale) > 0 {
		held, err := l.addressesHeld(ctx, c, s)
		if err != nil {
			return err
		}
		stale = plan.StaleDestinations(s, dsts, former, held)
	}
	in := plan.SecurityInput{Service: s, Want: want, Destinations: dsts, Stale: stale,
		RetainPorts: plan.RetainedPorts(s, slices.Concat(dsts, stale), l.services()), Tags: c.TagPolicy}
	_, err := l.nsgWriter().Submit(ctx, func(cur *armnetwork.SecurityGroup) (*armnetwork.SecurityGroup, error) {
		return plan.ApplySecurity(cur, in)
	})
	if err != nil {
		return fmt.Errorf("network security group %s: %w", l.cfg.SecurityGroupName, err)
	}
	return nil
}

// addressesHeld reads the cluster's load balancers and the services for plan.AddressesHeld.
func (l *LoadBalancer) addressesHeld(ctx context.Context, c *plan.Cluster, s *plan.Service) (map[netip.Addr]bool, error) {
	var lbs []*armnetwork.LoadBalancer
	for _, c := range l.clusters(c.ClusterName) {
		for _, internal := range []bool{false, true} {
			lb, err := l.lbWriter(c, c.LBName(internal)).Peek(ctx)
			if err != nil {
				return nil, fmt.Errorf("load balancer %s: %w", c.LBName(internal), err)
			}
			lbs = append(lbs, lb)
		}
	}
	if l.opts.Services == nil {
		return plan.AddressesHeld(s, lbs, nil), nil
	}
	svcs, err := l.opts.Services.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing services: %w", err)
	}
	return plan.AddressesHeld(s, lbs, svcs), nil
}

// services lists every service (none without a lister, or when the list fails: the shared
// rules are then repaired by the other services' next reconcile).
func (l *LoadBalancer) services() []*v1.Service {
	if l.opts.Services == nil {
		return nil
	}
	svcs, err := l.opts.Services.List(labels.Everything())
	if err != nil {
		return nil
	}
	return svcs
}
