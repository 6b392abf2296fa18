package plan

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
)

// PublicIPPlan is the public IP one family of a service uses.
type PublicIPPlan struct {
	Family naming.Family
	Name   string
	// Existing is the current PIP (nil: it must be created).
	Existing *armnetwork.PublicIPAddress
	// UserOwned PIPs (no service tag, or chosen by the user by name or address) are used as
	// they are and never modified or deleted by the provider.
	UserOwned bool
	// Mutate creates or updates the PIP (nil when nothing is to be written). It is a writer
	// Mutation for the PIP's writer.
	Mutate func(cur *armnetwork.PublicIPAddress) (*armnetwork.PublicIPAddress, error)
	// IPTags is what happens to the IP tags of an existing managed PIP (azure-pip-ip-tags):
	// IPTagsRecreate asks the caller to delete the PIP and plan again; IPTagsRefuse carries the
	// Warning for the service.
	IPTags IPTagDecision
}

// PlanPublicIPs decides, per IP family of a public service, which public IP it uses and how it
// must look. existing are the PIPs of the service's PIP resource group.
func PlanPublicIPs(c *Cluster, s *Service, existing []*armnetwork.PublicIPAddress) ([]PublicIPPlan, error) {
	var out []PublicIPPlan
	for _, f := range s.Families() {
		p, err := planPIP(c, s, f, existing)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func planPIP(c *Cluster, s *Service, f naming.Family, existing []*armnetwork.PublicIPAddress) (PublicIPPlan, error) {
	o := s.Opts
	userName, ip, prefixID := o.PIPNameIPv4, o.IPv4, o.PIPPrefixIDIPv4
	if f == naming.IPv6 {
		userName, ip, prefixID = o.PIPNameIPv6, o.IPv6, o.PIPPrefixIDIPv6
	}
	plan := PublicIPPlan{Family: f}
	switch {
	case userName != "":
		plan.Name = userName
		plan.Existing = findPIP(existing, func(p *armnetwork.PublicIPAddress) bool { return eqFold(str(p.Name), userName) })
		if plan.Existing == nil {
			return plan, fmt.Errorf("public IP %q (from the pip-name annotation) does not exist", userName)
		}
	case ip.IsValid():
		plan.Existing = findPIP(existing, func(p *armnetwork.PublicIPAddress) bool { return pipAddr(p) == ip })
		if plan.Existing == nil {
			return plan, fmt.Errorf("no public IP with address %s exists in the public IP resource group", ip)
		}
		plan.Name = str(plan.Existing.Name)
	default:
		plan.Name = naming.PublicIPName(c.ClusterName, s.LBName(), prefixID, s.DualStack(), f)
		plan.Existing = findPIP(existing, func(p *armnetwork.PublicIPAddress) bool { return eqFold(str(p.Name), plan.Name) })
	}
	if plan.Existing != nil {
		if err := checkFamily(plan.Existing, f); err != nil {
			return plan, err
		}
		if !IsManagedPIP(c, plan.Existing) {
			plan.UserOwned = true
			return plan, nil
		}
	}
	key := s.Key()
	plan.IPTags = DecideIPTags(c, s, plan.Existing)
	plan.Mutate = func(cur *armnetwork.PublicIPAddress) (*armnetwork.PublicIPAddress, error) {
		if cur == nil {
			if plan.Existing != nil {
				return nil, fmt.Errorf("public IP %s disappeared", plan.Name)
			}
			cur = newPIP(c, s, plan.Name, f, prefixID)
		} else if !IsManagedPIP(c, cur) {
			return nil, fmt.Errorf("public IP %s is not managed by this cluster", plan.Name)
		} else if DecideIPTags(c, s, cur).Action == IPTagsUpdate {
			setIPTags(cur, s.Opts.PIPIPTags)
		}
		bindPIP(c, s, cur, key)
		return cur, nil
	}
	return plan, nil
}

// IsManagedPIP reports whether this cluster manages the PIP: it carries a service tag and no
// other cluster's name tag.
func IsManagedPIP(c *Cluster, p *armnetwork.PublicIPAddress) bool {
	if _, ok := naming.ServiceTagValue(p.Tags); !ok {
		return false
	}
	if cl, ok := naming.ClusterTagValue(p.Tags); ok && cl != "" && !eqFold(cl, c.ClusterName) {
		return false
	}
	return true
}

// PIPServices lists the services a managed PIP is bound to.
func PIPServices(p *armnetwork.PublicIPAddress) []string {
	v, _ := naming.ServiceTagValue(p.Tags)
	return naming.ParseServiceTag(v)
}

func newPIP(c *Cluster, s *Service, name string, f naming.Family, prefixID string) *armnetwork.PublicIPAddress {
	version := armnetwork.IPVersionIPv4
	if f == naming.IPv6 {
		version = armnetwork.IPVersionIPv6
	}
	p := &armnetwork.PublicIPAddress{
		Name:     to.Ptr(name),
		Location: to.Ptr(c.Location),
		SKU: &armnetwork.PublicIPAddressSKU{
			Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard),
			Tier: to.Ptr(armnetwork.PublicIPAddressSKUTierRegional),
		},
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{
			PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic),
			PublicIPAddressVersion:   to.Ptr(version),
		},
		Tags: map[string]*string{},
	}
	// New Standard PIPs are zone-redundant across the region's zones (zones are immutable later);
	// an edge zone has none.
	if p.ExtendedLocation = c.extendedLocation(); p.ExtendedLocation == nil {
		for _, z := range c.Zones {
			p.Zones = append(p.Zones, to.Ptr(z))
		}
	}
	for _, t := range s.Opts.PIPIPTags {
		p.Properties.IPTags = append(p.Properties.IPTags, &armnetwork.IPTag{IPTagType: to.Ptr(t.Type), Tag: to.Ptr(t.Tag)})
	}
	if prefixID != "" {
		p.Properties.PublicIPPrefix = &armnetwork.SubResource{ID: to.Ptr(prefixID)}
	}
	return p
}

// bindPIP adds the service to the PIP's ownership tags and applies its tag and DNS annotations.
func bindPIP(c *Cluster, s *Service, p *armnetwork.PublicIPAddress, key string) {
	if p.Tags == nil {
		p.Tags = map[string]*string{}
	}
	services := append(PIPServices(p), key)
	setTag(p.Tags, naming.TagService, naming.LegacyTagService, naming.FormatServiceTag(services))
	setTag(p.Tags, naming.TagClusterName, naming.LegacyTagClusterName, c.ClusterName)
	tagPIP(c, s, p)
	if p.Properties == nil {
		p.Properties = &armnetwork.PublicIPAddressPropertiesFormat{}
	}
	if label := s.Opts.DNSLabelName; label != nil {
		owner, hasOwner := naming.DNSLabelServiceTagValue(p.Tags)
		switch {
		case *label != "":
			if p.Properties.DNSSettings == nil {
				p.Properties.DNSSettings = &armnetwork.PublicIPAddressDNSSettings{}
			}
			p.Properties.DNSSettings.DomainNameLabel = to.Ptr(*label)
			setTag(p.Tags, naming.TagDNSLabelService, naming.LegacyTagDNSLabelService, key)
		case hasOwner && owner == key:
			// An empty label removes the label this service set, and only that one.
			p.Properties.DNSSettings = nil
			deleteTag(p.Tags, naming.TagDNSLabelService, naming.LegacyTagDNSLabelService)
		}
	}
}

// UnbindPIP removes the service from a managed PIP. It returns nil (delete the PIP) when no
// service is left. Whether the PIP may be deleted is decided by its tags alone — a managed PIP
// was created by a cloud provider of this cluster — as in the existing provider, never by how
// the leaving service referred to it (by default name, by pip-name or by address): a managed
// PIP shared by several services is deleted when the last of them leaves, whichever way they
// named it. PIPs without a service tag (users') and other clusters' are returned unchanged.
func UnbindPIP(c *Cluster, p *armnetwork.PublicIPAddress, key string) (*armnetwork.PublicIPAddress, error) {
	if p == nil || !IsManagedPIP(c, p) {
		return p, nil
	}
	left := slices.DeleteFunc(PIPServices(p), func(k string) bool { return k == key })
	if owner, ok := naming.DNSLabelServiceTagValue(p.Tags); ok && owner == key {
		deleteTag(p.Tags, naming.TagDNSLabelService, naming.LegacyTagDNSLabelService)
		if p.Properties != nil {
			p.Properties.DNSSettings = nil
		}
	}
	if len(left) == 0 {
		return nil, nil
	}
	setTag(p.Tags, naming.TagService, naming.LegacyTagService, naming.FormatServiceTag(left))
	return p, nil
}

// ReleasablePIPs are the managed PIPs bound to the service, in any listed resource group, that
// its current plans no longer use. The plans are in pipRG: a PIP of the same name in another
// group (the service's group changed) is released too.
func ReleasablePIPs(c *Cluster, key, pipRG string, listed []ListedPIP, keep []PublicIPPlan) []ListedPIP {
	var out []ListedPIP
	for _, lp := range BoundPIPs(c, key, listed) {
		if eqFold(lp.RG, pipRG) && slices.ContainsFunc(keep, func(k PublicIPPlan) bool { return eqFold(k.Name, str(lp.PIP.Name)) }) {
			continue
		}
		out = append(out, lp)
	}
	return out
}

// UserChosen reports whether the service names this PIP (pip-name annotation or a requested
// address): such PIPs are never deleted, only untagged.
func UserChosen(s *Service, p *armnetwork.PublicIPAddress) bool {
	o := s.Opts
	name, addr := str(p.Name), pipAddr(p)
	return (o.PIPNameIPv4 != "" && eqFold(o.PIPNameIPv4, name)) || (o.PIPNameIPv6 != "" && eqFold(o.PIPNameIPv6, name)) ||
		(addr.IsValid() && (addr == o.IPv4 || addr == o.IPv6))
}

// setTag writes key (replacing a legacy spelling or different-case duplicate).
func setTag(tags map[string]*string, key, legacy, value string) {
	for k := range tags {
		if (eqFold(k, key) && k != key) || eqFold(k, legacy) {
			delete(tags, k)
		}
	}
	tags[key] = to.Ptr(value)
}

func deleteTag(tags map[string]*string, keys ...string) {
	for k := range tags {
		for _, d := range keys {
			if eqFold(k, d) {
				delete(tags, k)
			}
		}
	}
}

func findPIP(ps []*armnetwork.PublicIPAddress, match func(*armnetwork.PublicIPAddress) bool) *armnetwork.PublicIPAddress {
	for _, p := range ps {
		if p != nil && match(p) {
			return p
		}
	}
	return nil
}

// pipAddr is the PIP's address (invalid when not allocated).
func pipAddr(p *armnetwork.PublicIPAddress) netip.Addr {
	if p.Properties == nil || p.Properties.IPAddress == nil {
		return netip.Addr{}
	}
	a, err := netip.ParseAddr(*p.Properties.IPAddress)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

// PIPAddress is the allocated address of a PIP, if any.
func PIPAddress(p *armnetwork.PublicIPAddress) (netip.Addr, bool) {
	a := pipAddr(p)
	return a, a.IsValid()
}

func checkFamily(p *armnetwork.PublicIPAddress, f naming.Family) error {
	if p.Properties == nil || p.Properties.PublicIPAddressVersion == nil {
		return nil
	}
	v := *p.Properties.PublicIPAddressVersion
	if (f == naming.IPv6) != (v == armnetwork.IPVersionIPv6) {
		return fmt.Errorf("public IP %s is %s, the service needs %s", str(p.Name), v, f)
	}
	return nil
}
