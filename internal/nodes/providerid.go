// Package nodes resolves Kubernetes nodes to Azure VMs (availability-set and standalone VMs,
// scale-set VMs in Uniform and Flexible orchestration, VMs in other resource groups) and knows
// which nodes are not Azure VMs at all (on-prem nodes). It computes what a node should carry:
// providerID, addresses, instance type, zone and region.
package nodes

import (
	"fmt"
	"strings"
)

// ProviderIDPrefix is the scheme of Azure provider IDs.
const ProviderIDPrefix = "azure://"

// Kind says what a provider ID points at.
type Kind int

// Kinds of instances.
const (
	// KindVM is a virtual machine: standalone, in an availability set, or in a Flexible scale set.
	KindVM Kind = iota + 1
	// KindScaleSetVM is an instance of a Uniform scale set.
	KindScaleSetVM
	// KindUnmanaged is a node that is not an Azure VM (azure://<node-name>).
	KindUnmanaged
)

func (k Kind) String() string {
	switch k {
	case KindVM:
		return "vm"
	case KindScaleSetVM:
		return "vmss-vm"
	case KindUnmanaged:
		return "unmanaged"
	}
	return "unknown"
}

// ProviderID is a parsed provider ID.
type ProviderID struct {
	Kind           Kind
	SubscriptionID string
	ResourceGroup  string
	// Name is the VM name (KindVM) or the node name (KindUnmanaged).
	Name string
	// ScaleSet and InstanceID are set for KindScaleSetVM.
	ScaleSet   string
	InstanceID string
}

// ParseProviderID parses
//
//	azure:///subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Compute/virtualMachines/<name>
//	azure:///subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Compute/virtualMachineScaleSets/<ss>/virtualMachines/<id>
//	azure://<node-name>     (an on-prem node)
//
// Segment names are matched case-insensitively; values keep their case except the resource
// group, which is lower-cased as the existing provider does.
func ParseProviderID(id string) (ProviderID, error) {
	if len(id) < len(ProviderIDPrefix) || !strings.EqualFold(id[:len(ProviderIDPrefix)], ProviderIDPrefix) {
		return ProviderID{}, fmt.Errorf("provider ID %q does not start with %s", id, ProviderIDPrefix)
	}
	rest := id[len(ProviderIDPrefix):]
	if !strings.HasPrefix(rest, "/") {
		if rest == "" || strings.Contains(rest, "/") {
			return ProviderID{}, fmt.Errorf("provider ID %q is neither an Azure resource ID nor azure://<node-name>", id)
		}
		return ProviderID{Kind: KindUnmanaged, Name: rest}, nil
	}
	return ParseVMResourceID(rest)
}

// ParseVMResourceID parses the ARM ID of a VM or a scale-set VM (a provider ID without prefix).
func ParseVMResourceID(id string) (ProviderID, error) {
	segs := strings.Split(strings.Trim(id, "/"), "/")
	bad := func() (ProviderID, error) {
		return ProviderID{}, fmt.Errorf("%q is not the resource ID of a virtual machine or scale set VM", id)
	}
	if len(segs) < 8 || !strings.EqualFold(segs[0], "subscriptions") || !strings.EqualFold(segs[2], "resourceGroups") ||
		!strings.EqualFold(segs[4], "providers") || !strings.EqualFold(segs[5], "Microsoft.Compute") {
		return bad()
	}
	p := ProviderID{SubscriptionID: segs[1], ResourceGroup: strings.ToLower(segs[3])}
	switch {
	case len(segs) == 8 && strings.EqualFold(segs[6], "virtualMachines") && segs[7] != "":
		p.Kind, p.Name = KindVM, segs[7]
	case len(segs) == 10 && strings.EqualFold(segs[6], "virtualMachineScaleSets") &&
		strings.EqualFold(segs[8], "virtualMachines") && segs[7] != "" && segs[9] != "":
		p.Kind, p.ScaleSet, p.InstanceID = KindScaleSetVM, segs[7], segs[9]
	default:
		return bad()
	}
	if p.SubscriptionID == "" || p.ResourceGroup == "" {
		return bad()
	}
	return p, nil
}

// ResourceID returns the ARM ID (empty for unmanaged nodes).
func (p ProviderID) ResourceID() string {
	switch p.Kind {
	case KindVM:
		return VMID(p.SubscriptionID, p.ResourceGroup, p.Name)
	case KindScaleSetVM:
		return ScaleSetVMID(p.SubscriptionID, p.ResourceGroup, p.ScaleSet, p.InstanceID)
	}
	return ""
}

// String formats the provider ID.
func (p ProviderID) String() string {
	if p.Kind == KindUnmanaged {
		return UnmanagedProviderID(p.Name)
	}
	return ProviderIDPrefix + p.ResourceID()
}

// VMID formats a VM resource ID (resource group lower-cased).
func VMID(sub, rg, name string) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachines/%s",
		sub, strings.ToLower(rg), name)
}

// ScaleSetVMID formats a scale set VM resource ID (resource group lower-cased).
func ScaleSetVMID(sub, rg, ss, instanceID string) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachineScaleSets/%s/virtualMachines/%s",
		sub, strings.ToLower(rg), ss, instanceID)
}

// UnmanagedProviderID is the provider ID of an on-prem node.
func UnmanagedProviderID(nodeName string) string { return ProviderIDPrefix + nodeName }

// ProviderIDToVMID returns the ARM resource ID a provider ID points at, in canonical form.
func ProviderIDToVMID(providerID string) (string, error) {
	p, err := ParseProviderID(providerID)
	if err != nil {
		return "", err
	}
	if p.Kind == KindUnmanaged {
		return "", fmt.Errorf("provider ID %q is an on-prem node, not an Azure VM", providerID)
	}
	return p.ResourceID(), nil
}

// ResourceGroupOfID returns the resource group segment of any ARM ID (lower-cased), or "".
func ResourceGroupOfID(id string) string {
	segs := strings.Split(strings.Trim(id, "/"), "/")
	for i := 0; i+1 < len(segs); i++ {
		if strings.EqualFold(segs[i], "resourceGroups") {
			return strings.ToLower(segs[i+1])
		}
	}
	return ""
}

// NameOfID returns the last segment of an ARM ID.
func NameOfID(id string) string {
	id = strings.TrimRight(id, "/")
	return id[strings.LastIndex(id, "/")+1:]
}
