package plan

import (
	"slices"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
)

// A managed public IP can live in any resource group a service named when it was created or
// bound: the service's resource-group annotation may change afterwards (or the service be
// deleted), and the public IP must still be found there to be released. The groups looked in
// are the base groups (always), the groups recorded before the CCM wrote a public IP there
// (kept across restarts by the caller), and the groups the services name now.

// ListedPIP is a public IP as listed, with the resource group it was listed in.
type ListedPIP struct {
	RG  string
	PIP *armnetwork.PublicIPAddress
}

// BaseGroups are the resource groups always looked in for the cluster's public IPs:
// resourceGroup (where a service's public IPs go without the resource-group annotation) and
// loadBalancerResourceGroup.
func BaseGroups(cfg *config.Config) []string {
	return PublicIPGroups(cfg, nil)
}

// PublicIPGroups are the base groups, the recorded groups and the extra ones (the groups
// services name now), each once (resource group names are case-insensitive; the first
// spelling is kept), sorted case-insensitively. Empty names are left out.
func PublicIPGroups(cfg *config.Config, recorded []string, extra ...string) []string {
	var out []string
	add := func(rg string) {
		if rg != "" && !slices.ContainsFunc(out, func(o string) bool { return strings.EqualFold(o, rg) }) {
			out = append(out, rg)
		}
	}
	add(cfg.ResourceGroup)
	add(cfg.LoadBalancerRG())
	for _, rg := range recorded {
		add(rg)
	}
	for _, rg := range extra {
		add(rg)
	}
	sort.SliceStable(out, func(i, j int) bool { return strings.ToLower(out[i]) < strings.ToLower(out[j]) })
	return out
}

// NeedsRecord reports whether the group must be recorded before a public IP is written there:
// it is not a base group, so nothing but the record finds it once no service names it.
func NeedsRecord(cfg *config.Config, rg string) bool {
	return !slices.ContainsFunc(BaseGroups(cfg), func(b string) bool { return strings.EqualFold(b, rg) })
}

// BoundPIPs are the listed managed PIPs whose service tag names the service.
func BoundPIPs(c *Cluster, key string, listed []ListedPIP) []ListedPIP {
	var out []ListedPIP
	for _, lp := range listed {
		if lp.PIP != nil && IsManagedPIP(c, lp.PIP) && slices.Contains(PIPServices(lp.PIP), key) {
			out = append(out, lp)
		}
	}
	return out
}

// OwnedByCluster reports whether the PIP carries this cluster's name tag and a service tag: it
// was created by a cloud provider of this cluster. Only such PIPs are released when none of
// their services exists any more (SweepPIP). A PIP with a service tag but no cluster tag is
// managed for the services that name it (IsManagedPIP, the existing provider's rule), but it
// may be a user's with a tag called "service", so nothing deletes it unasked.
func OwnedByCluster(c *Cluster, p *armnetwork.PublicIPAddress) bool {
	if p == nil {
		return false
	}
	if _, ok := naming.ServiceTagValue(p.Tags); !ok {
		return false
	}
	cl, ok := naming.ClusterTagValue(p.Tags)
	return ok && eqFold(cl, c.ClusterName)
}

// SweepCandidates are the listed PIPs owned by the cluster (OwnedByCluster), each once.
func SweepCandidates(c *Cluster, listed []ListedPIP) []ListedPIP {
	var out []ListedPIP
	seen := map[string]bool{}
	for _, lp := range listed {
		if !OwnedByCluster(c, lp.PIP) {
			continue
		}
		k := strings.ToLower(lp.RG + "/" + str(lp.PIP.Name))
		if !seen[k] {
			seen[k] = true
			out = append(out, lp)
		}
	}
	return out
}

// SweepPIP is the drift audit's release of an owned PIP whose services are gone: it removes
// the gone services from the service tag and returns nil (delete the PIP) when no service is
// left and the PIP is attached to nothing (an attached PIP is deleted by a later pass, once its
// frontend is gone: ARM refuses to delete it before). A service the tag names that is not in
// gone is in use, even one added since gone was decided. PIPs no longer owned by the cluster
// are returned unchanged.
func SweepPIP(c *Cluster, p *armnetwork.PublicIPAddress, gone map[string]bool) *armnetwork.PublicIPAddress {
	if p == nil || !OwnedByCluster(c, p) {
		return p
	}
	services := PIPServices(p)
	left := slices.DeleteFunc(slices.Clone(services), func(k string) bool { return gone[k] })
	if len(left) == 0 && !attached(p) {
		return nil
	}
	if len(left) == len(services) {
		return p
	}
	if owner, ok := naming.DNSLabelServiceTagValue(p.Tags); ok && gone[owner] {
		deleteTag(p.Tags, naming.TagDNSLabelService, naming.LegacyTagDNSLabelService)
		if p.Properties != nil {
			p.Properties.DNSSettings = nil
		}
	}
	setTag(p.Tags, naming.TagService, naming.LegacyTagService, naming.FormatServiceTag(left))
	return p
}

// SweepDue reports whether SweepPIP would change or delete the PIP (it does not modify it).
func SweepDue(c *Cluster, p *armnetwork.PublicIPAddress, gone map[string]bool) bool {
	if !OwnedByCluster(c, p) {
		return false
	}
	services := PIPServices(p)
	return slices.ContainsFunc(services, func(k string) bool { return gone[k] }) || (len(services) == 0 && !attached(p))
}

// attached reports whether the PIP is referenced by an ip configuration (a load balancer
// frontend, a NIC) or a NAT gateway.
func attached(p *armnetwork.PublicIPAddress) bool {
	return p.Properties != nil && (p.Properties.IPConfiguration != nil || p.Properties.NatGateway != nil)
}
