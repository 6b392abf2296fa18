// Package membership plans nodeIPConfiguration backend pool membership: which ip configurations
// must join or leave the cluster's pools, grouped by the Azure resource that holds them (a NIC
// for standalone, availability-set and Flexible scale set VMs; a scale set VM for Uniform scale
// sets), and the in-place edits of those resources. It does no I/O.
package membership

import (
	"fmt"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// Kind is the kind of resource that holds an ip configuration.
type Kind int

const (
	// KindNIC is a network interface resource (…/networkInterfaces/<nic>).
	KindNIC Kind = iota
	// KindScaleSetVM is a Uniform scale set instance (…/virtualMachineScaleSets/<ss>/virtualMachines/<i>);
	// its NICs are edited through the instance's networkProfileConfiguration.
	KindScaleSetVM
)

func (k Kind) String() string {
	if k == KindScaleSetVM {
		return "scaleSetVM"
	}
	return "nic"
}

// Ref is a parsed ip configuration ID.
type Ref struct {
	ID   string
	Kind Kind
	// Owner is the resource written to change the ip configuration: the NIC ID, or the scale set
	// VM ID.
	Owner         string
	ResourceGroup string
	// ScaleSet and InstanceID are set for KindScaleSetVM.
	ScaleSet, InstanceID string
	NIC, IPConfig        string
}

// ParseIPConfigID parses the ID of a NIC ip configuration or of a Uniform scale set instance's
// ip configuration.
func ParseIPConfigID(id string) (Ref, error) {
	// Parsed segment by segment rather than with the SDK's parser, which is lenient (it trims
	// spaces and skips empty segments): a name that is not the ID's own segment would make
	// writes address another ip configuration. Fixed segments compare as ARM compares them,
	// case-insensitively; names keep the ID's casing.
	seg := strings.Split(id, "/")
	// "*" in a pattern is a name: any non-empty segment. IDs start with "/".
	matches := func(pattern ...string) bool {
		if len(seg) != len(pattern) {
			return false
		}
		for i, p := range pattern {
			if p == "*" && seg[i] == "" || p != "*" && !strings.EqualFold(seg[i], p) {
				return false
			}
		}
		return true
	}
	switch {
	case matches("", "subscriptions", "*", "resourceGroups", "*", "providers", "Microsoft.Network", "networkInterfaces", "*", "ipConfigurations", "*"):
		return Ref{ID: id, Kind: KindNIC, Owner: strings.Join(seg[:9], "/"), ResourceGroup: seg[4], NIC: seg[8], IPConfig: seg[10]}, nil
	case matches("", "subscriptions", "*", "resourceGroups", "*", "providers", "Microsoft.Compute", "virtualMachineScaleSets", "*",
		"virtualMachines", "*", "networkInterfaces", "*", "ipConfigurations", "*"):
		return Ref{ID: id, Kind: KindScaleSetVM, Owner: strings.Join(seg[:11], "/"), ResourceGroup: seg[4],
			ScaleSet: seg[8], InstanceID: seg[10], NIC: seg[12], IPConfig: seg[14]}, nil
	}
	return Ref{}, fmt.Errorf("not a NIC or scale set VM ip configuration ID: %q", id)
}

// Pool is one backend pool of the cluster: the ip configurations that must be in it and the
// ones it has (its backendIPConfigurations back-references).
type Pool struct {
	ID      string
	Want    []string
	Current []string
	// Keep are ip configurations left as they are, in or out (nodes whose VM is stopped or
	// deallocated: not added, as the existing provider does, and not removed).
	Keep []string
}

// Change adds or removes one pool reference on one ip configuration of the owner.
type Change struct {
	NIC, IPConfig string
	PoolID        string
	Add           bool
}

// Edit is every change of one owner resource.
type Edit struct {
	Kind                 Kind
	Owner                string
	ResourceGroup        string
	ScaleSet, InstanceID string
	Changes              []Change
}

// Plan diffs the pools: wanted ip configurations missing from a pool are added, and (when
// remove is true) members that are not wanted are removed. Callers pass remove=false when they
// could not resolve every eligible node, so a lookup failure never takes a node out. IDs are
// compared case-insensitively, as ARM does. IDs that cannot be parsed are returned in skipped.
func Plan(pools []Pool, remove bool) (edits []Edit, skipped []string) {
	byOwner := map[string]*Edit{}
	add := func(id, pool string, isAdd bool) {
		r, err := ParseIPConfigID(id)
		if err != nil {
			skipped = append(skipped, id)
			return
		}
		k := strings.ToLower(r.Owner)
		e := byOwner[k]
		if e == nil {
			e = &Edit{Kind: r.Kind, Owner: r.Owner, ResourceGroup: r.ResourceGroup, ScaleSet: r.ScaleSet, InstanceID: r.InstanceID}
			byOwner[k] = e
		}
		e.Changes = append(e.Changes, Change{NIC: r.NIC, IPConfig: r.IPConfig, PoolID: pool, Add: isAdd})
	}
	for _, p := range pools {
		cur := lowerSet(p.Current)
		want := lowerSet(p.Want)
		keep := lowerSet(p.Keep)
		for _, id := range dedupe(p.Want) {
			if !cur[strings.ToLower(id)] && !keep[strings.ToLower(id)] {
				add(id, p.ID, true)
			}
		}
		if remove {
			for _, id := range dedupe(p.Current) {
				if !want[strings.ToLower(id)] && !keep[strings.ToLower(id)] {
					add(id, p.ID, false)
				}
			}
		}
	}
	for _, e := range byOwner {
		edits = append(edits, *e)
	}
	sort.Slice(edits, func(i, j int) bool { return strings.ToLower(edits[i].Owner) < strings.ToLower(edits[j].Owner) })
	return edits, skipped
}

func lowerSet(ids []string) map[string]bool {
	m := make(map[string]bool, len(ids))
	for _, id := range ids {
		m[strings.ToLower(id)] = true
	}
	return m
}

func dedupe(ids []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, id := range ids {
		if k := strings.ToLower(id); !seen[k] {
			seen[k] = true
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// editRefs adds or removes poolID in refs (other pools are kept) and reports a change.
func editRefs[T any](refs []*T, id func(*T) *string, mk func(string) *T, poolID string, add bool) ([]*T, bool) {
	for i, r := range refs {
		if r != nil && strings.EqualFold(deref(id(r)), poolID) {
			if add {
				return refs, false
			}
			return append(refs[:i:i], refs[i+1:]...), true
		}
	}
	if !add {
		return refs, false
	}
	return append(refs, mk(poolID)), true
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func nicPoolID(p *armnetwork.BackendAddressPool) *string { return p.ID }
func newNICPool(id string) *armnetwork.BackendAddressPool {
	return &armnetwork.BackendAddressPool{ID: to.Ptr(id)}
}
func subResID(p *armcompute.SubResource) *string  { return p.ID }
func newSubRes(id string) *armcompute.SubResource { return &armcompute.SubResource{ID: to.Ptr(id)} }
func eq(a *string, b string) bool                 { return strings.EqualFold(deref(a), b) }
func missing(kind, owner, nic, cfg string) error {
	return fmt.Errorf("%s %s has no ip configuration %s/%s", kind, owner, nic, cfg)
}

// ApplyToNIC applies the changes to a NIC model in place. It reports whether anything changed;
// adding to an ip configuration the NIC does not have is an error (removing one is a no-op).
func ApplyToNIC(nic *armnetwork.Interface, changes []Change) (bool, error) {
	changed := false
	for _, c := range changes {
		var cfg *armnetwork.InterfaceIPConfiguration
		if nic != nil && nic.Properties != nil {
			for _, ic := range nic.Properties.IPConfigurations {
				if ic != nil && eq(ic.Name, c.IPConfig) {
					cfg = ic
				}
			}
		}
		if cfg == nil {
			if c.Add {
				return false, missing("network interface", idOf(nic), c.NIC, c.IPConfig)
			}
			continue
		}
		if cfg.Properties == nil {
			cfg.Properties = &armnetwork.InterfaceIPConfigurationPropertiesFormat{}
		}
		var ch bool
		cfg.Properties.LoadBalancerBackendAddressPools, ch = editRefs(cfg.Properties.LoadBalancerBackendAddressPools,
			nicPoolID, newNICPool, c.PoolID, c.Add)
		changed = changed || ch
	}
	return changed, nil
}

func idOf(nic *armnetwork.Interface) string {
	if nic == nil {
		return "<missing>"
	}
	return deref(nic.ID)
}

// ApplyToScaleSetVM applies the changes to a Uniform scale set instance's
// networkProfileConfiguration in place (NIC configurations are matched by name).
func ApplyToScaleSetVM(vm *armcompute.VirtualMachineScaleSetVM, changes []Change) (bool, error) {
	var nics []*armcompute.VirtualMachineScaleSetNetworkConfiguration
	if vm != nil && vm.Properties != nil && vm.Properties.NetworkProfileConfiguration != nil {
		nics = vm.Properties.NetworkProfileConfiguration.NetworkInterfaceConfigurations
	}
	changed := false
	for _, c := range changes {
		var cfg *armcompute.VirtualMachineScaleSetIPConfiguration
		for _, n := range nics {
			if n == nil || !eq(n.Name, c.NIC) || n.Properties == nil {
				continue
			}
			for _, ic := range n.Properties.IPConfigurations {
				if ic != nil && eq(ic.Name, c.IPConfig) {
					cfg = ic
				}
			}
		}
		if cfg == nil {
			if c.Add {
				id := "<missing>"
				if vm != nil {
					id = deref(vm.ID)
				}
				return false, missing("scale set VM", id, c.NIC, c.IPConfig)
			}
			continue
		}
		if cfg.Properties == nil {
			cfg.Properties = &armcompute.VirtualMachineScaleSetIPConfigurationProperties{}
		}
		var ch bool
		cfg.Properties.LoadBalancerBackendAddressPools, ch = editRefs(cfg.Properties.LoadBalancerBackendAddressPools,
			subResID, newSubRes, c.PoolID, c.Add)
		changed = changed || ch
	}
	return changed, nil
}

// ModelNICConfigs are the NIC configurations of a scale set model (nil when it has none, as a
// Flexible scale set without a VM profile).
func ModelNICConfigs(ss *armcompute.VirtualMachineScaleSet) []*armcompute.VirtualMachineScaleSetNetworkConfiguration {
	if ss == nil || ss.Properties == nil || ss.Properties.VirtualMachineProfile == nil ||
		ss.Properties.VirtualMachineProfile.NetworkProfile == nil {
		return nil
	}
	return ss.Properties.VirtualMachineProfile.NetworkProfile.NetworkInterfaceConfigurations
}

// modelIPConfig is the ip configuration of the model's primary NIC configuration that joins a
// pool of the family: the primary one for IPv4, the first IPv6 one for IPv6 (as the existing
// provider picks them).
func modelIPConfig(ss *armcompute.VirtualMachineScaleSet, ipv6 bool) *armcompute.VirtualMachineScaleSetIPConfiguration {
	var nic *armcompute.VirtualMachineScaleSetNetworkConfiguration
	for _, n := range ModelNICConfigs(ss) {
		if n == nil || n.Properties == nil {
			continue
		}
		if n.Properties.Primary != nil && *n.Properties.Primary {
			nic = n
			break
		}
		if nic == nil {
			nic = n
		}
	}
	if nic == nil {
		return nil
	}
	var first *armcompute.VirtualMachineScaleSetIPConfiguration
	for _, ic := range nic.Properties.IPConfigurations {
		if ic == nil {
			continue
		}
		v6 := ic.Properties != nil && ic.Properties.PrivateIPAddressVersion != nil &&
			*ic.Properties.PrivateIPAddressVersion == armcompute.IPVersionIPv6
		if v6 != ipv6 {
			continue
		}
		if !ipv6 && ic.Properties != nil && ic.Properties.Primary != nil && *ic.Properties.Primary {
			return ic
		}
		if first == nil {
			first = ic
		}
	}
	return first
}

// ModelHasPool reports whether any ip configuration of the scale set model references poolID.
func ModelHasPool(ss *armcompute.VirtualMachineScaleSet, poolID string) bool {
	for _, n := range ModelNICConfigs(ss) {
		if n == nil || n.Properties == nil {
			continue
		}
		for _, ic := range n.Properties.IPConfigurations {
			if ic == nil || ic.Properties == nil {
				continue
			}
			for _, p := range ic.Properties.LoadBalancerBackendAddressPools {
				if p != nil && eq(p.ID, poolID) {
					return true
				}
			}
		}
	}
	return false
}

// AddModelPool adds poolID to the scale set model's ip configuration of the family, so new
// instances join the pool. It reports whether anything changed; a model without such an ip
// configuration is left alone (false).
func AddModelPool(ss *armcompute.VirtualMachineScaleSet, poolID string, ipv6 bool) bool {
	ic := modelIPConfig(ss, ipv6)
	if ic == nil || ModelHasPool(ss, poolID) {
		return false
	}
	if ic.Properties == nil {
		ic.Properties = &armcompute.VirtualMachineScaleSetIPConfigurationProperties{}
	}
	var ch bool
	ic.Properties.LoadBalancerBackendAddressPools, ch = editRefs(ic.Properties.LoadBalancerBackendAddressPools, subResID, newSubRes, poolID, true)
	return ch
}

// RemoveModelPool removes poolID from every ip configuration of the scale set model.
func RemoveModelPool(ss *armcompute.VirtualMachineScaleSet, poolID string) bool {
	changed := false
	for _, n := range ModelNICConfigs(ss) {
		if n == nil || n.Properties == nil {
			continue
		}
		for _, ic := range n.Properties.IPConfigurations {
			if ic == nil || ic.Properties == nil {
				continue
			}
			var ch bool
			ic.Properties.LoadBalancerBackendAddressPools, ch = editRefs(ic.Properties.LoadBalancerBackendAddressPools, subResID, newSubRes, poolID, false)
			changed = changed || ch
		}
	}
	return changed
}
