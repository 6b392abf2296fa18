package plan

import (
	"net/netip"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/azureid"
	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
)

// LoadBalancerClass is the spec.loadBalancerClass served here besides none.
const LoadBalancerClass = "service.k8s.io/azure"

// ServedHere reports whether the service's loadBalancerClass is served by this provider.
func ServedHere(svc *v1.Service) bool {
	return svc.Spec.LoadBalancerClass == nil || *svc.Spec.LoadBalancerClass == LoadBalancerClass
}

// Lenient reads a service for cleaning up: a service whose annotations are now invalid must
// still be found and removed, with whatever can be read (internal or public, its public IP names
// and group, floating IP).
func Lenient(svc *v1.Service) *Service {
	if o, err := annotations.Parse(svc); err == nil {
		return &Service{Svc: svc, Opts: o}
	}
	o := &annotations.ServiceOptions{Ports: map[int32]annotations.PortOptions{}, IdleTimeoutMinutes: annotations.DefaultIdleTimeoutMinutes}
	o.Internal = strings.EqualFold(strings.TrimSpace(svc.Annotations[annotations.Internal]), "true")
	o.PIPNameIPv4 = strings.TrimSpace(svc.Annotations[annotations.PIPName])
	o.PIPNameIPv6 = strings.TrimSpace(svc.Annotations[annotations.PIPNameIPv6])
	o.PIPResourceGroup = strings.TrimSpace(svc.Annotations[annotations.ResourceGroup])
	o.DisableFloatingIP = strings.EqualFold(strings.TrimSpace(svc.Annotations[annotations.DisableFloatingIP]), "true")
	return &Service{Svc: svc, Opts: o}
}

// NewCluster is the cluster settings of azure.json for --cluster-name clusterName, in a region
// with the given zones.
func NewCluster(cfg *config.Config, clusterName string, zones []string) *Cluster {
	return &Cluster{
		SubscriptionID:      cfg.NetworkSubscriptionID(),
		ResourceGroup:       cfg.LoadBalancerRG(),
		Location:            cfg.Location,
		ClusterName:         clusterName,
		LBNamePrefix:        cfg.LoadBalancerName,
		Zones:               zones,
		DisableOutboundSNAT: cfg.OutboundSNATDisabled(),
		SharedProbe:         strings.EqualFold(cfg.ClusterServiceLoadBalancerHealthProbeMode, config.HealthProbeModeShared),
		SharedProbePort:     cfg.ClusterServiceSharedLoadBalancerHealthProbePort,
		SharedProbePath:     cfg.ClusterServiceSharedLoadBalancerHealthProbePath,
		TagPolicy:           cfg.TagPolicy(),
		IPTagMutation:       cfg.EnableIPTagMutationForExistingPublicIP,
		EdgeZone:            cfg.ExtendedLocationName,
	}
}

// WithPrefix is c with the load balancers of another multipleStandardLoadBalancerConfigurations
// entry (name "" keeps c's).
func (c *Cluster) WithPrefix(name string) *Cluster {
	out := *c
	if name != "" {
		out.LBNamePrefix = name
	}
	return &out
}

// ConfigTags merges azure.json tags ("k=v,k2=v2") and tagsMap (which wins).
func ConfigTags(cfg *config.Config) map[string]string {
	out := cfg.TagPolicy().Config
	if len(out) == 0 {
		return nil
	}
	return out
}

// LoadBalancerIDs are the resource IDs of every load balancer the cluster may have: the
// public and internal one of the default prefix, and both of every
// multipleStandardLoadBalancerConfigurations entry.
func LoadBalancerIDs(cfg *config.Config, clusterName string) []string {
	c := NewCluster(cfg, clusterName, nil)
	seen := map[string]bool{}
	var out []string
	add := func(name string) {
		if id := c.LBID(name); name != "" && !seen[strings.ToLower(id)] {
			seen[strings.ToLower(id)] = true
			out = append(out, id)
		}
	}
	add(c.LBName(false))
	add(c.LBName(true))
	for _, m := range cfg.MultipleStandardLoadBalancerConfigurations {
		if m.Name != "" {
			add(m.Name)
			add(m.Name + "-internal")
		}
	}
	return out
}

// SubnetID is the subnet of the service's internal frontends (azure-load-balancer-internal-subnet,
// else azure.json subnetName).
func SubnetID(cfg *config.Config, s *Service) string {
	subnet := s.Opts.InternalSubnet
	if subnet == "" {
		subnet = cfg.SubnetName
	}
	return azureid.Subnet(cfg.NetworkSubscriptionID(), cfg.VnetRG(), cfg.VnetName, subnet)
}

// PublicIPResourceGroup is where the service's public IPs live (azure-pip-resource-group, else
// azure.json resourceGroup).
func PublicIPResourceGroup(cfg *config.Config, s *Service) string {
	if s.Opts.PIPResourceGroup != "" {
		return s.Opts.PIPResourceGroup
	}
	return cfg.ResourceGroup
}

// Status is the service status for its frontend addresses and additional public IPs.
func Status(ips, extra []netip.Addr) *v1.LoadBalancerStatus {
	st := &v1.LoadBalancerStatus{}
	for _, list := range [][]netip.Addr{ips, extra} {
		for _, a := range list {
			st.Ingress = append(st.Ingress, v1.LoadBalancerIngress{IP: a.String()})
		}
	}
	return st
}

// AddrOf parses an address field (nil or malformed: false).
func AddrOf(s *string) (netip.Addr, bool) {
	if s == nil {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(*s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}
