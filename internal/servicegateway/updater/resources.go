package updater

import (
	"fmt"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// Names and tags of the resources built for the service gateway (the existing provider's
// names, so a cluster moving between the two keeps its resources).
const (
	// GatewayName is the service gateway's fixed name in the cluster resource group.
	GatewayName = "servicegateway"
	// FrontendName is the only frontend of a service's load balancer.
	FrontendName = "frontend"
	// LBSKUService is the ARM load balancer SKU of gateway load balancers.
	LBSKUService = "Service"
	// TagCluster marks the resources this cluster created; only they are ever cleaned up.
	TagCluster = "k8s-azure-cluster-name"
	// TagKind says which gateway service a resource belongs to (Inbound or Outbound).
	TagKind = "k8s-azure-service-gateway"
	// ReservedEgress is the gateway's own default NAT gateway identity: never touched.
	ReservedEgress = "default-natgw"
)

// Port is one service port as the load balancer rule needs it.
type Port struct {
	Protocol     string // Tcp or Udp
	FrontendPort int32
	BackendPort  int32
}

// InboundSpec is what the Azure resources of one LoadBalancer Service depend on.
type InboundSpec struct {
	Ports []Port
	// IdleTimeoutMinutes of the rules (4–100; the existing provider allows 4–30).
	IdleTimeoutMinutes int32
	// SourceIPAffinity maps sessionAffinity ClientIP to the rules' SourceIP distribution.
	SourceIPAffinity bool
	IPv6             bool
}

// Fingerprint is the spec in one canonical string (the tracker's Config).
func (s InboundSpec) Fingerprint() string {
	ports := make([]string, 0, len(s.Ports))
	for _, p := range s.Ports {
		ports = append(ports, fmt.Sprintf("%s:%d>%d", strings.ToLower(p.Protocol), p.FrontendPort, p.BackendPort))
	}
	slices.Sort(ports)
	fam := "v4"
	if s.IPv6 {
		fam = "v6"
	}
	return fmt.Sprintf("%s|idle=%d|affinity=%t|%s", strings.Join(ports, ","), s.IdleTimeoutMinutes, s.SourceIPAffinity, fam)
}

// OutboundFingerprint is the Config of every egress identity: NAT gateways are never
// rewritten once created (their address families are fixed).
const OutboundFingerprint = "natgw|v4"

// RuleName is the existing provider's rule name: rule-<protocol>-<port>.
func RuleName(p Port) string {
	return fmt.Sprintf("rule-%s-%d", strings.ToLower(p.Protocol), p.FrontendPort)
}

// PIPName is the public IP of an inbound service or egress identity.
func PIPName(name string) string { return name + "-pip" }

// Scope is where the resources live.
type Scope struct {
	SubscriptionID, ResourceGroup, Location, ClusterName string
	// VNetID is the cluster VNet the gateway serves.
	VNetID string
}

func (s Scope) id(typ, name string) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/%s/%s", s.SubscriptionID, s.ResourceGroup, typ, name)
}

// GatewayID is the service gateway's resource ID.
func (s Scope) GatewayID() string { return s.id("serviceGateways", GatewayName) }

// LBID is the load balancer of an inbound service.
func (s Scope) LBID(name string) string { return s.id("loadBalancers", name) }

// PoolID is the backend pool of an inbound service's load balancer.
func (s Scope) PoolID(name string) string { return s.LBID(name) + "/backendAddressPools/" + name }

// PIPID is the public IP of a service.
func (s Scope) PIPID(name string) string { return s.id("publicIPAddresses", PIPName(name)) }

// NATID is the NAT gateway of an egress identity.
func (s Scope) NATID(name string) string { return s.id("natGateways", name) }

func (s Scope) tags(kind string) map[string]*string {
	return map[string]*string{TagCluster: to.Ptr(s.ClusterName), TagKind: to.Ptr(kind)}
}

// PublicIP builds the StandardV2 static public IP of a service.
func (s Scope) PublicIP(name, kind string, ipv6 bool) armnetwork.PublicIPAddress {
	v := armnetwork.IPVersionIPv4
	if ipv6 {
		v = armnetwork.IPVersionIPv6
	}
	return armnetwork.PublicIPAddress{
		Location: to.Ptr(s.Location), Tags: s.tags(kind),
		SKU: &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandardV2), Tier: to.Ptr(armnetwork.PublicIPAddressSKUTierRegional)},
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{
			PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic), PublicIPAddressVersion: to.Ptr(v),
		},
	}
}

// LoadBalancer builds the Service-SKU load balancer of an inbound service: one frontend on
// its public IP, one (gateway-filled) pool, one rule per port, no probes (pods are the
// backends; the gateway only lists ready ones).
func (s Scope) LoadBalancer(name string, spec InboundSpec) armnetwork.LoadBalancer {
	feID := s.LBID(name) + "/frontendIPConfigurations/" + FrontendName
	lb := armnetwork.LoadBalancer{
		Location: to.Ptr(s.Location), Tags: s.tags("Inbound"),
		SKU: &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUName(LBSKUService))},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{
			Scope: to.Ptr(armnetwork.LoadBalancerScopePublic),
			FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{Name: to.Ptr(FrontendName),
				Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{PublicIPAddress: &armnetwork.PublicIPAddress{ID: to.Ptr(s.PIPID(name))}}}},
			BackendAddressPools: []*armnetwork.BackendAddressPool{{Name: to.Ptr(name)}},
		},
	}
	for _, p := range spec.Ports {
		dist := armnetwork.LoadDistributionDefault
		if spec.SourceIPAffinity {
			dist = armnetwork.LoadDistributionSourceIP
		}
		r := &armnetwork.LoadBalancingRule{Name: to.Ptr(RuleName(p)), Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
			Protocol: to.Ptr(armnetwork.TransportProtocol(p.Protocol)), FrontendPort: to.Ptr(p.FrontendPort), BackendPort: to.Ptr(p.BackendPort),
			FrontendIPConfiguration: &armnetwork.SubResource{ID: to.Ptr(feID)},
			BackendAddressPool:      &armnetwork.SubResource{ID: to.Ptr(s.PoolID(name))},
			EnableFloatingIP:        to.Ptr(false), IdleTimeoutInMinutes: to.Ptr(spec.IdleTimeoutMinutes),
			LoadDistribution: to.Ptr(dist),
		}}
		if strings.EqualFold(p.Protocol, "Tcp") {
			r.Properties.EnableTCPReset = to.Ptr(true)
		}
		lb.Properties.LoadBalancingRules = append(lb.Properties.LoadBalancingRules, r)
	}
	return lb
}

// SpecOfLB reads back the spec a load balancer was built from (start-up), so that a service
// whose resources are already right is not rewritten after a restart.
func SpecOfLB(lb *armnetwork.LoadBalancer, ipv6 bool) InboundSpec {
	spec := InboundSpec{IPv6: ipv6}
	if lb == nil || lb.Properties == nil {
		return spec
	}
	for _, r := range lb.Properties.LoadBalancingRules {
		if r == nil || r.Properties == nil {
			continue
		}
		p := r.Properties
		spec.Ports = append(spec.Ports, Port{Protocol: string(deref(p.Protocol)), FrontendPort: deref(p.FrontendPort), BackendPort: deref(p.BackendPort)})
		spec.IdleTimeoutMinutes = deref(p.IdleTimeoutInMinutes)
		spec.SourceIPAffinity = deref(p.LoadDistribution) == armnetwork.LoadDistributionSourceIP
	}
	return spec
}

// NATGateway builds the StandardV2 NAT gateway of an egress identity, attached to the gateway.
func (s Scope) NATGateway(name string) armnetwork.NatGateway {
	return armnetwork.NatGateway{
		Location: to.Ptr(s.Location), Tags: s.tags("Outbound"),
		SKU: &armnetwork.NatGatewaySKU{Name: to.Ptr(armnetwork.NatGatewaySKUNameStandardV2)},
		Properties: &armnetwork.NatGatewayPropertiesFormat{
			PublicIPAddresses: []*armnetwork.SubResource{{ID: to.Ptr(s.PIPID(name))}},
			ServiceGateway:    &armnetwork.SubResource{ID: to.Ptr(s.GatewayID())},
		},
	}
}

// Registration is the gateway service entry of an inbound service or egress identity.
func (s Scope) Registration(name string, outbound bool) *armnetwork.ServiceGatewayService {
	if outbound {
		return &armnetwork.ServiceGatewayService{Name: to.Ptr(name), Properties: &armnetwork.ServiceGatewayServicePropertiesFormat{
			ServiceType: to.Ptr(armnetwork.ServiceTypeOutbound), PublicNatGatewayID: to.Ptr(s.NATID(name))}}
	}
	return &armnetwork.ServiceGatewayService{Name: to.Ptr(name), Properties: &armnetwork.ServiceGatewayServicePropertiesFormat{
		ServiceType: to.Ptr(armnetwork.ServiceTypeInbound),
		LoadBalancerBackendPools: []*armnetwork.BackendAddressPool{{ID: to.Ptr(s.PoolID(name)), Name: to.Ptr(name),
			Properties: &armnetwork.BackendAddressPoolPropertiesFormat{VirtualNetwork: &armnetwork.SubResource{ID: to.Ptr(s.VNetID)}}}},
	}}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
