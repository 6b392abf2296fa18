package nodes

import (
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
)

// VMSetKind is the kind of group a VM belongs to.
type VMSetKind string

// VM set kinds.
const (
	VMSetAvailabilitySet VMSetKind = "availabilitySet"
	VMSetStandalone      VMSetKind = "standalone"
	VMSetScaleSetUniform VMSetKind = "vmss-uniform"
	VMSetScaleSetFlex    VMSetKind = "vmss-flex"
	VMSetUnmanaged       VMSetKind = "unmanaged"
)

// VMSet identifies the availability set or scale set of a node (Name/ID empty for standalone
// VMs and on-prem nodes).
type VMSet struct {
	Kind          VMSetKind
	ResourceGroup string
	Name          string
	ID            string
}

// Instance is what Azure says about a node's VM.
type Instance struct {
	ProviderID        ProviderID
	VMSet             VMSet
	ComputerName      string
	Location          string
	Zones             []string
	FaultDomain       *int32
	VMSize            string
	ProvisioningState string
	// PowerState is the suffix of the PowerState/<x> status ("running", "deallocated" ...),
	// "" when the instance view is not known.
	PowerState string
	// NICIDs lists the VM's network interfaces, primary first.
	NICIDs []string
}

// IsShutdown reports a VM that is stopped, deallocated or deallocating (and not in the middle
// of a provisioning change), as the existing provider does.
func (i *Instance) IsShutdown() bool {
	if i == nil || i.ProviderID.Kind == KindUnmanaged {
		return false
	}
	if i.ProvisioningState != "" && !strings.EqualFold(i.ProvisioningState, "Succeeded") {
		return false
	}
	switch strings.ToLower(i.PowerState) {
	case "stopped", "deallocated", "deallocating":
		return true
	}
	return false
}

// Zone returns the topology zone and region labels (see Zone).
func (i *Instance) Zone() (zone, region string, err error) {
	return Zone(i.Location, i.Zones, i.FaultDomain)
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func strs(ps []*string) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		if p != nil {
			out = append(out, *p)
		}
	}
	return out
}

// powerState extracts the PowerState/<x> and ProvisioningState/<x> codes of an instance view.
func powerState(statuses []*armcompute.InstanceViewStatus) (power, provisioning string) {
	for _, s := range statuses {
		if s == nil || s.Code == nil {
			continue
		}
		code := *s.Code
		if v, ok := cutPrefixFold(code, "PowerState/"); ok {
			power = v
		} else if v, ok := cutPrefixFold(code, "ProvisioningState/"); ok && provisioning == "" {
			provisioning = v
		}
	}
	return power, provisioning
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return "", false
}

func nicIDs(refs []*armcompute.NetworkInterfaceReference) []string {
	var primary, others []string
	for _, r := range refs {
		if r == nil || r.ID == nil {
			continue
		}
		if r.Properties != nil && r.Properties.Primary != nil && *r.Properties.Primary {
			primary = append(primary, *r.ID)
		} else {
			others = append(others, *r.ID)
		}
	}
	return append(primary, others...)
}

// InstanceFromVM describes a VM (standalone, availability set or flexible scale set).
func InstanceFromVM(vm *armcompute.VirtualMachine, defaultSub string) Instance {
	inst := Instance{Location: str(vm.Location), Zones: strs(vm.Zones)}
	pid, err := ParseVMResourceID(str(vm.ID))
	if err != nil {
		pid = ProviderID{Kind: KindVM, SubscriptionID: defaultSub, ResourceGroup: ResourceGroupOfID(str(vm.ID)), Name: str(vm.Name)}
	}
	inst.ProviderID = pid
	inst.VMSet = VMSet{Kind: VMSetStandalone, ResourceGroup: pid.ResourceGroup}
	p := vm.Properties
	if p == nil {
		return inst
	}
	switch {
	case p.VirtualMachineScaleSet != nil && p.VirtualMachineScaleSet.ID != nil:
		id := *p.VirtualMachineScaleSet.ID
		inst.VMSet = VMSet{Kind: VMSetScaleSetFlex, ResourceGroup: ResourceGroupOfID(id), Name: NameOfID(id), ID: id}
	case p.AvailabilitySet != nil && p.AvailabilitySet.ID != nil:
		id := *p.AvailabilitySet.ID
		inst.VMSet = VMSet{Kind: VMSetAvailabilitySet, ResourceGroup: ResourceGroupOfID(id), Name: NameOfID(id), ID: id}
	}
	if p.HardwareProfile != nil && p.HardwareProfile.VMSize != nil {
		inst.VMSize = string(*p.HardwareProfile.VMSize)
	}
	if p.OSProfile != nil {
		inst.ComputerName = str(p.OSProfile.ComputerName)
	}
	inst.ProvisioningState = str(p.ProvisioningState)
	if p.InstanceView != nil {
		inst.FaultDomain = p.InstanceView.PlatformFaultDomain
		var prov string
		inst.PowerState, prov = powerState(p.InstanceView.Statuses)
		if inst.ProvisioningState == "" {
			inst.ProvisioningState = prov
		}
	}
	if inst.FaultDomain == nil {
		inst.FaultDomain = p.PlatformFaultDomain
	}
	if p.NetworkProfile != nil {
		inst.NICIDs = nicIDs(p.NetworkProfile.NetworkInterfaces)
	}
	return inst
}

// InstanceFromScaleSetVM describes an instance of a Uniform scale set.
func InstanceFromScaleSetVM(vm *armcompute.VirtualMachineScaleSetVM, rg, scaleSet, defaultSub string) Instance {
	inst := Instance{Location: str(vm.Location), Zones: strs(vm.Zones)}
	pid, err := ParseVMResourceID(str(vm.ID))
	if err != nil || pid.Kind != KindScaleSetVM {
		pid = ProviderID{Kind: KindScaleSetVM, SubscriptionID: defaultSub, ResourceGroup: strings.ToLower(rg),
			ScaleSet: scaleSet, InstanceID: str(vm.InstanceID)}
	}
	inst.ProviderID = pid
	ssID := "/subscriptions/" + pid.SubscriptionID + "/resourceGroups/" + pid.ResourceGroup +
		"/providers/Microsoft.Compute/virtualMachineScaleSets/" + pid.ScaleSet
	inst.VMSet = VMSet{Kind: VMSetScaleSetUniform, ResourceGroup: pid.ResourceGroup, Name: pid.ScaleSet, ID: ssID}
	if vm.SKU != nil {
		inst.VMSize = str(vm.SKU.Name)
	}
	p := vm.Properties
	if p == nil {
		return inst
	}
	if inst.VMSize == "" && p.HardwareProfile != nil && p.HardwareProfile.VMSize != nil {
		inst.VMSize = string(*p.HardwareProfile.VMSize)
	}
	if p.OSProfile != nil {
		inst.ComputerName = str(p.OSProfile.ComputerName)
	}
	inst.ProvisioningState = str(p.ProvisioningState)
	if p.InstanceView != nil {
		inst.FaultDomain = p.InstanceView.PlatformFaultDomain
		var prov string
		inst.PowerState, prov = powerState(p.InstanceView.Statuses)
		if inst.ProvisioningState == "" {
			inst.ProvisioningState = prov
		}
	}
	if p.NetworkProfile != nil {
		inst.NICIDs = nicIDs(p.NetworkProfile.NetworkInterfaces)
	}
	return inst
}
