package topology

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// PrivateLinkService is a private link service on a load balancer frontend of the topology
// (a provider's own service, e.g. one a cluster must leave alone).
type PrivateLinkService struct {
	ResourceGroup string `json:"resourceGroup"`
	Name          string `json:"name"`
	// LoadBalancer and Frontend name a Standard load balancer of the topology (in
	// LoadBalancerResourceGroup, default ResourceGroup) and one of its frontends.
	LoadBalancer              string `json:"loadBalancer"`
	LoadBalancerResourceGroup string `json:"loadBalancerResourceGroup,omitempty"`
	Frontend                  string `json:"frontend"`
	// Subnet holds the NAT addresses; its privateLinkServiceNetworkPolicies must be Disabled.
	Subnet SubnetRef `json:"subnet,omitempty"`
	// IPCount NAT addresses (default: len(StaticIPs), at least 1), the first StaticIPs static.
	IPCount       int               `json:"ipCount,omitempty"`
	StaticIPs     []string          `json:"staticIPs,omitempty"`
	Visibility    []string          `json:"visibility,omitempty"`
	AutoApproval  []string          `json:"autoApproval,omitempty"`
	Fqdns         []string          `json:"fqdns,omitempty"`
	ProxyProtocol bool              `json:"proxyProtocol,omitempty"`
	Tags          map[string]string `json:"tags,omitempty"`
}

// PrivateEndpoint is a consumer's private endpoint: it can connect to a service of the same
// topology (by name) or of any subscription (by resource ID or alias).
type PrivateEndpoint struct {
	ResourceGroup string    `json:"resourceGroup"`
	Name          string    `json:"name"`
	Subnet        SubnetRef `json:"subnet,omitempty"`
	// PrivateLinkService is the name of a service of this topology, a private link service
	// resource ID, or an alias (<name>.<guid>.<region>.azure.privatelinkservice).
	PrivateLinkService string `json:"privateLinkService"`
	// Manual asks for approval (manualPrivateLinkServiceConnections) instead of an automatic
	// connection, which only succeeds from an auto-approved or the service's own subscription.
	Manual         bool   `json:"manual,omitempty"`
	RequestMessage string `json:"requestMessage,omitempty"`
	// PrivateIP is a static address in Subnet (default dynamic).
	PrivateIP string `json:"privateIP,omitempty"`
}

// SeededPrivateLinkService is a private link service a seed created.
type SeededPrivateLinkService struct {
	ID    string `json:"id"`
	Alias string `json:"alias"`
	// NATIPs are the NAT addresses, primary first.
	NATIPs []string `json:"natIPs"`
}

// SeededPrivateEndpoint is a private endpoint a seed created.
type SeededPrivateEndpoint struct {
	ID                 string `json:"id"`
	PrivateLinkService string `json:"privateLinkService"`
	PrivateIP          string `json:"privateIP"`
	// ConnectionState is Pending, Approved, Rejected or Disconnected.
	ConnectionState string `json:"connectionState"`
}

func (t *Topology) normalizePrivateLink(fail func(string, ...any), need func(what, rg, name string),
	resolve func(owner, rg string, ref SubnetRef, ipv6 bool) SubnetRef) {
	t.PrivateLinkServices = append([]PrivateLinkService(nil), t.PrivateLinkServices...)
	for i := range t.PrivateLinkServices {
		p := &t.PrivateLinkServices[i]
		need("privateLinkService", p.ResourceGroup, p.Name)
		owner := "privateLinkService " + p.Name
		if p.LoadBalancerResourceGroup == "" {
			p.LoadBalancerResourceGroup = p.ResourceGroup
		}
		lb := t.loadBalancer(p.LoadBalancerResourceGroup, p.LoadBalancer)
		switch {
		case lb == nil:
			fail("%s: loadBalancer %s/%s is not in the topology", owner, p.LoadBalancerResourceGroup, p.LoadBalancer)
		case !lb.hasFrontend(p.Frontend):
			fail("%s: loadBalancer %s has no frontend %q", owner, p.LoadBalancer, p.Frontend)
		}
		p.Subnet = resolve(owner, p.ResourceGroup, p.Subnet, false)
		if p.IPCount == 0 {
			p.IPCount = max(1, len(p.StaticIPs))
		}
		if p.IPCount < len(p.StaticIPs) || p.IPCount > 8 {
			fail("%s: ipCount %d must be 1..8 and cover the %d staticIPs", owner, p.IPCount, len(p.StaticIPs))
		}
		for _, ip := range p.StaticIPs {
			if net.ParseIP(ip) == nil {
				fail("%s: staticIPs has %q, which is not an IP address", owner, ip)
			}
		}
	}
	t.PrivateEndpoints = append([]PrivateEndpoint(nil), t.PrivateEndpoints...)
	for i := range t.PrivateEndpoints {
		e := &t.PrivateEndpoints[i]
		need("privateEndpoint", e.ResourceGroup, e.Name)
		owner := "privateEndpoint " + e.Name
		e.Subnet = resolve(owner, e.ResourceGroup, e.Subnet, false)
		switch target := e.PrivateLinkService; {
		case target == "":
			fail("%s needs privateLinkService (a name of this topology, a resource ID or an alias)", owner)
		case strings.HasPrefix(target, "/"), strings.HasSuffix(strings.ToLower(target), ".azure.privatelinkservice"):
		default:
			found := 0
			for _, p := range t.PrivateLinkServices {
				if strings.EqualFold(p.Name, target) {
					e.PrivateLinkService = resID(t.SubscriptionID, p.ResourceGroup, "Microsoft.Network/privateLinkServices", p.Name)
					found++
				}
			}
			if found != 1 {
				fail("%s: privateLinkService %q names %d services of the topology, want 1", owner, target, found)
			}
		}
	}
}

func (t *Topology) loadBalancer(rg, name string) *LoadBalancer {
	for i := range t.LoadBalancers {
		if strings.EqualFold(t.LoadBalancers[i].ResourceGroup, rg) && strings.EqualFold(t.LoadBalancers[i].Name, name) {
			return &t.LoadBalancers[i]
		}
	}
	return nil
}

func (lb *LoadBalancer) hasFrontend(name string) bool {
	for _, f := range lb.Frontends {
		if strings.EqualFold(f.Name, name) {
			return true
		}
	}
	return false
}

func subscriptionSet(subs []string) map[string]any {
	if subs == nil {
		subs = []string{}
	}
	return map[string]any{"subscriptions": subs}
}

// privateLinkRequests creates the private link services, then the private endpoints.
func (t *Topology) privateLinkRequests() []Request {
	sub := t.SubscriptionID
	var reqs []Request
	for _, p := range t.PrivateLinkServices {
		var ipcs []any
		for i := 0; i < p.IPCount; i++ {
			props := map[string]any{"subnet": map[string]any{"id": t.subnetID(p.Subnet)}, "primary": i == 0,
				"privateIPAllocationMethod": "Dynamic", "privateIPAddressVersion": "IPv4"}
			if i < len(p.StaticIPs) {
				props["privateIPAllocationMethod"], props["privateIPAddress"] = "Static", p.StaticIPs[i]
			}
			ipcs = append(ipcs, map[string]any{"name": fmt.Sprintf("%s-nat-%d", p.Name, i), "properties": props})
		}
		fe := resID(sub, p.LoadBalancerResourceGroup, "Microsoft.Network/loadBalancers", p.LoadBalancer) + "/frontendIPConfigurations/" + p.Frontend
		fqdns := p.Fqdns
		if fqdns == nil {
			fqdns = []string{}
		}
		body := map[string]any{"location": t.Location, "properties": map[string]any{
			"loadBalancerFrontendIpConfigurations": []any{map[string]any{"id": fe}},
			"ipConfigurations":                     ipcs,
			"visibility":                           subscriptionSet(p.Visibility),
			"autoApproval":                         subscriptionSet(p.AutoApproval),
			"fqdns":                                fqdns,
			"enableProxyProtocol":                  p.ProxyProtocol,
		}}
		if len(p.Tags) > 0 {
			body["tags"] = p.Tags
		}
		reqs = append(reqs, Request{Method: "PUT", Path: resID(sub, p.ResourceGroup, "Microsoft.Network/privateLinkServices", p.Name),
			APIVersion: NetworkAPIVersion, Body: body})
	}
	for _, e := range t.PrivateEndpoints {
		conn := map[string]any{"name": e.Name, "properties": map[string]any{"privateLinkServiceId": e.PrivateLinkService,
			"requestMessage": e.RequestMessage}}
		props := map[string]any{"subnet": map[string]any{"id": t.subnetID(e.Subnet)},
			"privateLinkServiceConnections": []any{}, "manualPrivateLinkServiceConnections": []any{}}
		if e.Manual {
			props["manualPrivateLinkServiceConnections"] = []any{conn}
		} else {
			props["privateLinkServiceConnections"] = []any{conn}
		}
		if e.PrivateIP != "" {
			props["ipConfigurations"] = []any{map[string]any{"name": "static", "properties": map[string]any{"privateIPAddress": e.PrivateIP}}}
		}
		reqs = append(reqs, Request{Method: "PUT", Path: resID(sub, e.ResourceGroup, "Microsoft.Network/privateEndpoints", e.Name),
			APIVersion: NetworkAPIVersion, Body: map[string]any{"location": t.Location, "properties": props}})
	}
	return reqs
}

// collectPrivateLink reads the seeded private link services and endpoints back.
func (c *caller) collectPrivateLink(ctx context.Context, t *Topology, res *Result) error {
	for _, p := range t.PrivateLinkServices {
		var pls armnetwork.PrivateLinkService
		if err := c.getJSON(ctx, resID(t.SubscriptionID, p.ResourceGroup, "Microsoft.Network/privateLinkServices", p.Name)+"?api-version="+NetworkAPIVersion, &pls); err != nil {
			return err
		}
		s := SeededPrivateLinkService{ID: str(pls.ID), Alias: str(pls.Properties.Alias), NATIPs: []string{}}
		for _, ipc := range pls.Properties.IPConfigurations {
			s.NATIPs = append(s.NATIPs, str(ipc.Properties.PrivateIPAddress))
		}
		res.PrivateLinkServices = append(res.PrivateLinkServices, s)
	}
	for _, e := range t.PrivateEndpoints {
		var pe armnetwork.PrivateEndpoint
		if err := c.getJSON(ctx, resID(t.SubscriptionID, e.ResourceGroup, "Microsoft.Network/privateEndpoints", e.Name)+"?api-version="+NetworkAPIVersion, &pe); err != nil {
			return err
		}
		s := SeededPrivateEndpoint{ID: str(pe.ID)}
		for _, conn := range append(pe.Properties.PrivateLinkServiceConnections, pe.Properties.ManualPrivateLinkServiceConnections...) {
			s.PrivateLinkService = str(conn.Properties.PrivateLinkServiceID)
			if st := conn.Properties.PrivateLinkServiceConnectionState; st != nil {
				s.ConnectionState = str(st.Status)
			}
		}
		if len(pe.Properties.NetworkInterfaces) > 0 {
			var nic json.RawMessage
			if err := c.getJSON(ctx, str(pe.Properties.NetworkInterfaces[0].ID)+"?api-version="+NetworkAPIVersion, &nic); err != nil {
				return err
			}
			ips, err := primaryIPs([]json.RawMessage{nic})
			if err != nil {
				return err
			}
			if len(ips) > 0 {
				s.PrivateIP = ips[0]
			}
		}
		res.PrivateEndpoints = append(res.PrivateEndpoints, s)
	}
	return nil
}
