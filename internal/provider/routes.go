package provider

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/routes"
	"github.com/azure-ccm/azure-ccm/internal/writer"
)

// routeProvider implements cloudprovider.Routes over the route table's writer: every
// concurrent create and delete of the route controller shares one read-modify-write.
type routeProvider struct {
	c     *Cloud
	table *writer.Writer[armnetwork.RouteTable]
}

// ListRoutes returns the routes of the table (from the writer's cache while fresh; its own PUTs
// refresh it) plus the remembered routes of on-prem nodes.
func (r *routeProvider) ListRoutes(ctx context.Context, clusterName string) ([]*cloudprovider.Route, error) {
	table, err := r.table.Peek(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing routes of route table %s: %w", r.c.Config.RouteTableName, err)
	}
	if table != nil && r.tagsDiffer(table) {
		// The route controller lists every few seconds: configured tags reach the table (and
		// come back after a drift) without a route change.
		if _, err := r.table.Submit(ctx, r.tagged(func(cur *armnetwork.RouteTable) (*armnetwork.RouteTable, error) { return cur, nil })); err != nil {
			klog.ErrorS(err, "Updating the tags of the route table", "routeTable", r.c.Config.RouteTableName)
		}
	}
	var rs []*armnetwork.Route
	if table != nil && table.Properties != nil {
		rs = table.Properties.Routes
	}
	var out []*cloudprovider.Route
	for _, rt := range rs {
		if rt == nil || rt.Name == nil || rt.Properties == nil || rt.Properties.AddressPrefix == nil {
			continue
		}
		out = append(out, &cloudprovider.Route{
			Name:            *rt.Name,
			TargetNode:      types.NodeName(routes.NodeOf(*rt.Name)),
			DestinationCIDR: *rt.Properties.AddressPrefix,
		})
	}
	r.c.onPremMu.Lock()
	for _, rt := range r.c.onPremRoutes {
		rt := rt
		out = append(out, &rt)
	}
	r.c.onPremMu.Unlock()
	return out, nil
}

// CreateRoute adds a route for a node's pod CIDR; all concurrent creates and deletes share one
// route table PUT.
func (r *routeProvider) CreateRoute(ctx context.Context, clusterName, nameHint string, route *cloudprovider.Route) error {
	start := time.Now()
	err := r.createRoute(ctx, route)
	r.c.opScope().observe(opCreateRoute, string(route.TargetNode), start, err)
	return err
}

func (r *routeProvider) createRoute(ctx context.Context, route *cloudprovider.Route) error {
	node := string(route.TargetNode)
	name := routes.Name(node, route.DestinationCIDR)
	if r.c.Resolver.Nodes().IsUnmanaged(node) {
		r.c.onPremMu.Lock()
		r.c.onPremRoutes[name] = cloudprovider.Route{Name: name, TargetNode: route.TargetNode, DestinationCIDR: route.DestinationCIDR}
		r.c.onPremMu.Unlock()
		return nil
	}
	hop, err := r.nextHop(ctx, route)
	if err != nil {
		return err
	}
	return r.submit(ctx, routes.Op{Node: node, CIDR: route.DestinationCIDR, NextHop: hop})
}

// DeleteRoute removes a route (and the node's legacy route without CIDR suffix).
func (r *routeProvider) DeleteRoute(ctx context.Context, clusterName string, route *cloudprovider.Route) error {
	start := time.Now()
	err := r.deleteRoute(ctx, route)
	r.c.opScope().observe(opDeleteRoute, string(route.TargetNode), start, err)
	return err
}

func (r *routeProvider) deleteRoute(ctx context.Context, route *cloudprovider.Route) error {
	node := string(route.TargetNode)
	name := route.Name
	if name == "" {
		name = routes.Name(node, route.DestinationCIDR)
	}
	r.c.onPremMu.Lock()
	_, onPrem := r.c.onPremRoutes[name]
	delete(r.c.onPremRoutes, name)
	r.c.onPremMu.Unlock()
	if onPrem {
		return nil
	}
	return r.submit(ctx, routes.Op{Delete: true, Node: node, CIDR: route.DestinationCIDR, Name: name})
}

func (r *routeProvider) submit(ctx context.Context, op routes.Op) error {
	if _, err := r.table.Submit(ctx, r.tagged(routes.Change(r.c.Config.Location, op))); err != nil {
		return fmt.Errorf("route table %s: %w", r.c.Config.RouteTableName, err)
	}
	return nil
}

// tagsManaged: as in the existing provider, the configured tags are kept on the route table
// only when it is in the cluster's resource group (a table elsewhere is someone else's).
func (r *routeProvider) tagsManaged() bool {
	return strings.EqualFold(r.c.Config.RouteTableRG(), r.c.Config.ResourceGroup)
}

// tagged wraps a route table mutation so that the table also carries the configured tags.
func (r *routeProvider) tagged(m writer.Mutation[armnetwork.RouteTable]) writer.Mutation[armnetwork.RouteTable] {
	return func(cur *armnetwork.RouteTable) (*armnetwork.RouteTable, error) {
		next, err := m(cur)
		if err != nil || next == nil || !r.tagsManaged() {
			return next, err
		}
		next.Tags, _ = r.c.Config.TagPolicy().ApplyConfig(next.Tags)
		return next, nil
	}
}

// tagsDiffer reports whether the (shared, not to be edited) table lacks the configured tags.
func (r *routeProvider) tagsDiffer(table *armnetwork.RouteTable) bool {
	if !r.tagsManaged() {
		return false
	}
	cp := make(map[string]*string, len(table.Tags))
	for k, v := range table.Tags {
		cp[k] = v
	}
	_, changed := r.c.Config.TagPolicy().ApplyConfig(cp)
	return changed
}

// nextHop finds the node's IP of the CIDR's family: from the route's node addresses, the
// node object, or the VM's primary NIC.
func (r *routeProvider) nextHop(ctx context.Context, route *cloudprovider.Route) (string, error) {
	_, cidr, err := net.ParseCIDR(route.DestinationCIDR)
	if err != nil {
		return "", fmt.Errorf("route for node %s: %q is not a CIDR: %w", route.TargetNode, route.DestinationCIDR, err)
	}
	v6 := cidr.IP.To4() == nil
	pick := func(addrs []v1.NodeAddress) string {
		for _, a := range addrs {
			ip := net.ParseIP(a.Address)
			if a.Type == v1.NodeInternalIP && ip != nil && (ip.To4() == nil) == v6 {
				return a.Address
			}
		}
		return ""
	}
	if ip := pick(route.TargetNodeAddresses); ip != "" {
		return ip, nil
	}
	node, ok := r.c.Resolver.Nodes().Get(string(route.TargetNode))
	if ok {
		if ip := pick(node.Status.Addresses); ip != "" {
			return ip, nil
		}
	} else {
		node = &v1.Node{}
		node.Name = string(route.TargetNode)
	}
	inst, err := r.c.Resolver.Instance(ctx, node)
	if err != nil {
		return "", fmt.Errorf("route for node %s: %w", route.TargetNode, err)
	}
	configs, err := r.c.Resolver.IPConfigurations(ctx, inst)
	if err != nil {
		return "", fmt.Errorf("route for node %s: %w", route.TargetNode, err)
	}
	for _, c := range configs {
		if c.IPv6 == v6 && c.PrivateIP != "" {
			return c.PrivateIP, nil
		}
	}
	return "", fmt.Errorf("route for node %s: the VM has no private IP of the family of %s", route.TargetNode, route.DestinationCIDR)
}
