package compute

import (
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azsim/network"
)

// PowerState is the suffix of the instance view's "PowerState/<x>" status.
type PowerState string

const (
	PowerRunning     PowerState = "running"
	PowerStopped     PowerState = "stopped"
	PowerDeallocated PowerState = "deallocated"
)

var powerDisplay = map[PowerState]string{
	PowerRunning:     "VM running",
	PowerStopped:     "VM stopped",
	PowerDeallocated: "VM deallocated",
}

// Resource types as ARM spells them in "type".
const (
	TypeVM           = "Microsoft.Compute/virtualMachines"
	TypeVMSS         = "Microsoft.Compute/virtualMachineScaleSets"
	TypeVMSSVM       = "Microsoft.Compute/virtualMachineScaleSets/virtualMachines"
	TypeAvailSet     = "Microsoft.Compute/availabilitySets"
	TypeDisk         = "Microsoft.Compute/disks"
	TypeNIC          = "Microsoft.Network/networkInterfaces"
	orchestrationFlx = armcompute.OrchestrationModeFlexible
)

func instanceStatuses(power PowerState) []*armcompute.InstanceViewStatus {
	return []*armcompute.InstanceViewStatus{
		{
			Code:          to.Ptr("ProvisioningState/succeeded"),
			Level:         to.Ptr(armcompute.StatusLevelTypesInfo),
			DisplayStatus: to.Ptr("Provisioning succeeded"),
		},
		{
			Code:          to.Ptr("PowerState/" + string(power)),
			Level:         to.Ptr(armcompute.StatusLevelTypesInfo),
			DisplayStatus: to.Ptr(powerDisplay[power]),
		},
	}
}

// VMInstanceView renders the instance view of a standalone or Flexible VM.
func VMInstanceView(computerName string, power PowerState, faultDomain, updateDomain int) *armcompute.VirtualMachineInstanceView {
	iv := &armcompute.VirtualMachineInstanceView{
		PlatformFaultDomain:  to.Ptr(int32(faultDomain)),
		PlatformUpdateDomain: to.Ptr(int32(updateDomain)),
		Statuses:             instanceStatuses(power),
	}
	if computerName != "" {
		iv.ComputerName = to.Ptr(computerName)
	}
	return iv
}

// VMSSVMInstanceView renders the instance view of a Uniform instance.
func VMSSVMInstanceView(computerName string, power PowerState, faultDomain, updateDomain int) *armcompute.VirtualMachineScaleSetVMInstanceView {
	iv := &armcompute.VirtualMachineScaleSetVMInstanceView{
		PlatformFaultDomain:  to.Ptr(int32(faultDomain)),
		PlatformUpdateDomain: to.Ptr(int32(updateDomain)),
		Statuses:             instanceStatuses(power),
	}
	if computerName != "" {
		iv.ComputerName = to.Ptr(computerName)
	}
	return iv
}

// ScaleSetInstanceView summarises the power states of a scale set's
// instances as GET .../virtualMachineScaleSets/{ss}/instanceView does.
func ScaleSetInstanceView(states []PowerState) *armcompute.VirtualMachineScaleSetInstanceView {
	counts := map[PowerState]int32{}
	var order []PowerState
	for _, s := range states {
		if s == "" {
			continue
		}
		if counts[s] == 0 {
			order = append(order, s)
		}
		counts[s]++
	}
	sort.Slice(order, func(i, j int) bool { return order[i] < order[j] })
	summary := []*armcompute.VirtualMachineStatusCodeCount{}
	for _, s := range order {
		summary = append(summary, &armcompute.VirtualMachineStatusCodeCount{Code: to.Ptr("PowerState/" + string(s)), Count: to.Ptr(counts[s])})
	}
	return &armcompute.VirtualMachineScaleSetInstanceView{
		VirtualMachine: &armcompute.VirtualMachineScaleSetInstanceViewStatusesSummary{StatusesSummary: summary},
		Statuses:       instanceStatuses(PowerRunning)[:1],
	}
}

// IPConfigRef flattens one ip configuration of a scale set network profile.
type IPConfigRef struct {
	NIC, IPConfig string
	SubnetID      string
	Pools         []string // loadBalancerBackendAddressPools ids
	NATRules      []string // loadBalancerInboundNatPools ids
	Primary       bool     // primary ipconfig of the primary NIC
	IPv6          bool
}

// Version is the ip configuration's IP version as ARM spells it.
func (r IPConfigRef) Version() string {
	if r.IPv6 {
		return network.IPv6
	}
	return network.IPv4
}

// IPKey is the key of an allocated private IP in a Uniform instance.
func IPKey(nic, ipConfig string) string { return strings.ToLower(nic + "/" + ipConfig) }

// ScaleSetIPConfigs lists the ip configurations of scale set NIC configurations.
func ScaleSetIPConfigs(nics []*armcompute.VirtualMachineScaleSetNetworkConfiguration) []IPConfigRef {
	var out []IPConfigRef
	for i, nic := range nics {
		if nic == nil || nic.Properties == nil {
			continue
		}
		primaryNIC := boolOf(nic.Properties.Primary) || (len(nics) == 1 && i == 0)
		ipcs := nic.Properties.IPConfigurations
		for j, ipc := range ipcs {
			if ipc == nil {
				continue
			}
			ref := IPConfigRef{NIC: str(nic.Name), IPConfig: str(ipc.Name)}
			if p := ipc.Properties; p != nil {
				if p.Subnet != nil {
					ref.SubnetID = str(p.Subnet.ID)
				}
				for _, pool := range p.LoadBalancerBackendAddressPools {
					if pool != nil && pool.ID != nil {
						ref.Pools = append(ref.Pools, *pool.ID)
					}
				}
				for _, nat := range p.LoadBalancerInboundNatPools {
					if nat != nil && nat.ID != nil {
						ref.NATRules = append(ref.NATRules, *nat.ID)
					}
				}
				ref.Primary = primaryNIC && (boolOf(p.Primary) || (len(ipcs) == 1 && j == 0))
				ref.IPv6 = p.PrivateIPAddressVersion != nil && strings.EqualFold(string(*p.PrivateIPAddressVersion), string(armcompute.IPVersionIPv6))
			}
			out = append(out, ref)
		}
	}
	return out
}

// scaleSetNICConfigs returns the NIC configurations of a scale set model.
func scaleSetNICConfigs(ss *armcompute.VirtualMachineScaleSet) []*armcompute.VirtualMachineScaleSetNetworkConfiguration {
	if ss == nil || ss.Properties == nil || ss.Properties.VirtualMachineProfile == nil ||
		ss.Properties.VirtualMachineProfile.NetworkProfile == nil {
		return nil
	}
	return ss.Properties.VirtualMachineProfile.NetworkProfile.NetworkInterfaceConfigurations
}

// ComputerNamePrefix is the scale set's computerNamePrefix, or its name.
func ComputerNamePrefix(ss *armcompute.VirtualMachineScaleSet) string {
	if ss != nil && ss.Properties != nil && ss.Properties.VirtualMachineProfile != nil &&
		ss.Properties.VirtualMachineProfile.OSProfile != nil && ss.Properties.VirtualMachineProfile.OSProfile.ComputerNamePrefix != nil {
		return *ss.Properties.VirtualMachineProfile.OSProfile.ComputerNamePrefix
	}
	return str(ss.Name)
}

// IsFlexible reports whether a scale set uses Flexible orchestration.
func IsFlexible(ss *armcompute.VirtualMachineScaleSet) bool {
	return ss != nil && ss.Properties != nil && ss.Properties.OrchestrationMode != nil &&
		strings.EqualFold(string(*ss.Properties.OrchestrationMode), string(orchestrationFlx))
}

// ScaleSetZones returns the zones of a scale set as plain strings.
func ScaleSetZones(ss *armcompute.VirtualMachineScaleSet) []string {
	var zones []string
	for _, z := range ss.Zones {
		if z != nil {
			zones = append(zones, *z)
		}
	}
	return zones
}

// ScaleSetFaultDomains is the fault domain count instances are spread over.
func ScaleSetFaultDomains(ss *armcompute.VirtualMachineScaleSet) int {
	if ss.Properties != nil && ss.Properties.PlatformFaultDomainCount != nil && *ss.Properties.PlatformFaultDomainCount > 0 {
		return int(*ss.Properties.PlatformFaultDomainCount)
	}
	return DefaultFaultDomains(len(ss.Zones) > 0)
}

// NewUniformInstance builds the model of a new Uniform instance from the scale
// set model. ssID is the canonical scale set id; vmID the instance's GUID.
func NewUniformInstance(ss *armcompute.VirtualMachineScaleSet, ssID string, p Placement, vmID string, created time.Time) *armcompute.VirtualMachineScaleSetVM {
	name := UniformVMName(str(ss.Name), p.ID)
	vm := &armcompute.VirtualMachineScaleSetVM{
		ID:         to.Ptr(ssID + "/virtualMachines/" + strconv.Itoa(p.ID)),
		Name:       to.Ptr(name),
		Type:       to.Ptr(TypeVMSSVM),
		Location:   ss.Location,
		InstanceID: to.Ptr(strconv.Itoa(p.ID)),
		Tags:       cloneTags(ss.Tags),
		Properties: &armcompute.VirtualMachineScaleSetVMProperties{
			LatestModelApplied:        to.Ptr(true),
			ModelDefinitionApplied:    to.Ptr("VirtualMachineScaleSet"),
			ProvisioningState:         to.Ptr("Succeeded"),
			VMID:                      to.Ptr(vmID),
			TimeCreated:               to.Ptr(created.UTC()),
			ResilientVMDeletionStatus: to.Ptr(armcompute.ResilientVMDeletionStatusDisabled),
		},
	}
	if p.Zone != "" {
		vm.Zones = []*string{to.Ptr(p.Zone)}
	}
	if ss.SKU != nil {
		vm.SKU = &armcompute.SKU{Name: ss.SKU.Name, Tier: ss.SKU.Tier}
		vm.Properties.HardwareProfile = &armcompute.HardwareProfile{VMSize: (*armcompute.VirtualMachineSizeTypes)(ss.SKU.Name)}
	}
	var model *armcompute.VirtualMachineScaleSetOSProfile
	if prof := ss.Properties.VirtualMachineProfile; prof != nil {
		model = prof.OSProfile
	}
	vm.Properties.OSProfile = InstanceOSProfile(ComputerName(ComputerNamePrefix(ss), p.ID), model)
	if prof := ss.Properties.VirtualMachineProfile; prof != nil {
		vm.Properties.StorageProfile = &armcompute.StorageProfile{
			OSDisk: &armcompute.OSDisk{
				Name:         to.Ptr(UniformOSDiskName(str(ss.Name), name, vmID)),
				CreateOption: to.Ptr(armcompute.DiskCreateOptionTypesFromImage),
			},
			DataDisks: []*armcompute.DataDisk{},
		}
		if sp := prof.StorageProfile; sp != nil {
			vm.Properties.StorageProfile.ImageReference = Clone(sp.ImageReference)
			if od := sp.OSDisk; od != nil {
				d := vm.Properties.StorageProfile.OSDisk
				d.OSType, d.Caching, d.DiskSizeGB = od.OSType, od.Caching, od.DiskSizeGB
				if od.ManagedDisk != nil {
					d.ManagedDisk = &armcompute.ManagedDiskParameters{StorageAccountType: od.ManagedDisk.StorageAccountType}
				}
			}
		}
		DefaultVMOSDisk(vm.Properties.StorageProfile, name, vmID)
	}
	ApplyScaleSetModel(vm, ss)
	SyncUniformNetworkProfile(vm)
	return vm
}

// ApplyScaleSetModel copies the scale set's network model onto an instance,
// which is what "manualupgrade" (UpdateInstances) does.
func ApplyScaleSetModel(vm *armcompute.VirtualMachineScaleSetVM, ss *armcompute.VirtualMachineScaleSet) {
	nics := scaleSetNICConfigs(ss)
	cloned := Clone(&nics)
	vm.Properties.NetworkProfileConfiguration = &armcompute.VirtualMachineScaleSetVMNetworkProfileConfiguration{
		NetworkInterfaceConfigurations: *cloned,
	}
	vm.Properties.LatestModelApplied = to.Ptr(true)
}

// SyncUniformNetworkProfile recomputes the read-only networkProfile (NIC ids)
// of an instance from its networkProfileConfiguration.
func SyncUniformNetworkProfile(vm *armcompute.VirtualMachineScaleSetVM) {
	var refs []*armcompute.NetworkInterfaceReference
	if cfg := vm.Properties.NetworkProfileConfiguration; cfg != nil {
		for i, nic := range cfg.NetworkInterfaceConfigurations {
			if nic == nil || nic.Name == nil {
				continue
			}
			primary := len(cfg.NetworkInterfaceConfigurations) == 1 && i == 0
			if nic.Properties != nil && nic.Properties.Primary != nil {
				primary = *nic.Properties.Primary
			}
			refs = append(refs, &armcompute.NetworkInterfaceReference{
				ID:         to.Ptr(str(vm.ID) + "/networkInterfaces/" + *nic.Name),
				Properties: &armcompute.NetworkInterfaceReferenceProperties{Primary: to.Ptr(primary)},
			})
		}
	}
	vm.Properties.NetworkProfile = &armcompute.NetworkProfile{NetworkInterfaces: refs}
}

// UniformNICs renders the network interfaces of a Uniform instance as the
// Network API shows them under .../virtualMachines/{i}/networkInterfaces.
// ips maps IPKey(nic, ipconfig) to the allocated private address.
func UniformNICs(vm *armcompute.VirtualMachineScaleSetVM, ips map[string]string) []*armnetwork.Interface {
	var out []*armnetwork.Interface
	cfg := vm.Properties.NetworkProfileConfiguration
	if cfg == nil {
		return nil
	}
	refs := ScaleSetIPConfigs(cfg.NetworkInterfaceConfigurations)
	for i, nic := range cfg.NetworkInterfaceConfigurations {
		if nic == nil || nic.Name == nil {
			continue
		}
		nicID := str(vm.ID) + "/networkInterfaces/" + *nic.Name
		iface := &armnetwork.Interface{
			ID:       to.Ptr(nicID),
			Name:     nic.Name,
			Location: vm.Location,
			Etag:     to.Ptr(`W/"` + strings.Trim(str(vm.Etag), `"`) + `"`),
			Properties: &armnetwork.InterfacePropertiesFormat{
				VirtualMachine:    &armnetwork.SubResource{ID: vm.ID},
				ProvisioningState: to.Ptr(armnetwork.ProvisioningStateSucceeded),
				Primary:           to.Ptr(len(cfg.NetworkInterfaceConfigurations) == 1 && i == 0),
			},
		}
		if p := nic.Properties; p != nil {
			if p.Primary != nil {
				iface.Properties.Primary = p.Primary
			}
			iface.Properties.EnableAcceleratedNetworking = p.EnableAcceleratedNetworking
			iface.Properties.EnableIPForwarding = p.EnableIPForwarding
			if p.NetworkSecurityGroup != nil {
				iface.Properties.NetworkSecurityGroup = &armnetwork.SecurityGroup{ID: p.NetworkSecurityGroup.ID}
			}
		}
		for _, r := range refs {
			if r.NIC != *nic.Name {
				continue
			}
			iface.Properties.IPConfigurations = append(iface.Properties.IPConfigurations, nicIPConfig(nicID, r, ips[IPKey(r.NIC, r.IPConfig)]))
		}
		out = append(out, iface)
	}
	return out
}

func nicIPConfig(nicID string, r IPConfigRef, ip string) *armnetwork.InterfaceIPConfiguration {
	version := armnetwork.IPVersionIPv4
	if r.IPv6 {
		version = armnetwork.IPVersionIPv6
	}
	props := &armnetwork.InterfaceIPConfigurationPropertiesFormat{
		Primary:                   to.Ptr(r.Primary),
		PrivateIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodDynamic),
		PrivateIPAddressVersion:   to.Ptr(version),
		ProvisioningState:         to.Ptr(armnetwork.ProvisioningStateSucceeded),
	}
	if ip != "" {
		props.PrivateIPAddress = to.Ptr(ip)
	}
	if r.SubnetID != "" {
		props.Subnet = &armnetwork.Subnet{ID: to.Ptr(r.SubnetID)}
	}
	for _, id := range r.Pools {
		props.LoadBalancerBackendAddressPools = append(props.LoadBalancerBackendAddressPools, &armnetwork.BackendAddressPool{ID: to.Ptr(id)})
	}
	return &armnetwork.InterfaceIPConfiguration{
		ID:         to.Ptr(nicID + "/ipConfigurations/" + r.IPConfig),
		Name:       to.Ptr(r.IPConfig),
		Properties: props,
	}
}

// FlexNIC builds the standalone NIC Azure creates for a Flexible member from
// the scale set's first (primary) NIC configuration. The private address is
// left to the Network handler that stores it.
func FlexNIC(ss *armcompute.VirtualMachineScaleSet, nicID, vmID string) *armnetwork.Interface {
	nics := scaleSetNICConfigs(ss)
	iface := &armnetwork.Interface{
		Location: ss.Location,
		Properties: &armnetwork.InterfacePropertiesFormat{
			VirtualMachine: &armnetwork.SubResource{ID: to.Ptr(vmID)},
		},
	}
	var primary *armcompute.VirtualMachineScaleSetNetworkConfiguration
	for i, n := range nics {
		if n != nil && (i == 0 || (n.Properties != nil && boolOf(n.Properties.Primary))) {
			primary = n
		}
	}
	if primary == nil {
		return iface
	}
	refs := ScaleSetIPConfigs([]*armcompute.VirtualMachineScaleSetNetworkConfiguration{primary})
	if p := primary.Properties; p != nil {
		iface.Properties.EnableAcceleratedNetworking = p.EnableAcceleratedNetworking
		iface.Properties.EnableIPForwarding = p.EnableIPForwarding
		if p.NetworkSecurityGroup != nil {
			iface.Properties.NetworkSecurityGroup = &armnetwork.SecurityGroup{ID: p.NetworkSecurityGroup.ID}
		}
	}
	for _, r := range refs {
		ipc := nicIPConfig(nicID, r, "")
		ipc.ID = nil // the Network handler canonicalises ids
		ipc.Properties.ProvisioningState = nil
		iface.Properties.IPConfigurations = append(iface.Properties.IPConfigurations, ipc)
	}
	return iface
}

// NewFlexVM builds a Flexible member VM created from the scale set's capacity.
func NewFlexVM(ss *armcompute.VirtualMachineScaleSet, ssID, vmID, name, zone, nicID, guid string, created time.Time) *armcompute.VirtualMachine {
	vm := &armcompute.VirtualMachine{
		ID:       to.Ptr(vmID),
		Name:     to.Ptr(name),
		Type:     to.Ptr(TypeVM),
		Location: ss.Location,
		Tags:     cloneTags(ss.Tags),
		Properties: &armcompute.VirtualMachineProperties{
			VirtualMachineScaleSet: &armcompute.SubResource{ID: to.Ptr(ssID)},
			ProvisioningState:      to.Ptr("Succeeded"),
			VMID:                   to.Ptr(guid),
			TimeCreated:            to.Ptr(created.UTC()),
			OSProfile:              &armcompute.OSProfile{ComputerName: to.Ptr(name)},
			NetworkProfile: &armcompute.NetworkProfile{NetworkInterfaces: []*armcompute.NetworkInterfaceReference{{
				ID:         to.Ptr(nicID),
				Properties: &armcompute.NetworkInterfaceReferenceProperties{Primary: to.Ptr(true)},
			}}},
			StorageProfile: &armcompute.StorageProfile{DataDisks: []*armcompute.DataDisk{}},
		},
	}
	if zone != "" {
		vm.Zones = []*string{to.Ptr(zone)}
	}
	if ss.SKU != nil && ss.SKU.Name != nil {
		vm.Properties.HardwareProfile = &armcompute.HardwareProfile{VMSize: (*armcompute.VirtualMachineSizeTypes)(ss.SKU.Name)}
	}
	if prof := ss.Properties.VirtualMachineProfile; prof != nil && prof.OSProfile != nil {
		if prof.OSProfile.ComputerNamePrefix != nil {
			// Flexible members get the prefix plus a random suffix; reuse the
			// name's hex suffix so it stays unique and stable.
			vm.Properties.OSProfile.ComputerName = to.Ptr(*prof.OSProfile.ComputerNamePrefix + name[strings.LastIndex(name, "_")+1:])
		}
		vm.Properties.OSProfile.AdminUsername = prof.OSProfile.AdminUsername
	}
	if prof := ss.Properties.VirtualMachineProfile; prof != nil && prof.StorageProfile != nil {
		sp := prof.StorageProfile
		vm.Properties.StorageProfile.ImageReference = Clone(sp.ImageReference)
		vm.Properties.StorageProfile.OSDisk = &armcompute.OSDisk{CreateOption: to.Ptr(armcompute.DiskCreateOptionTypesFromImage)}
		if od := sp.OSDisk; od != nil {
			d := vm.Properties.StorageProfile.OSDisk
			d.OSType, d.Caching, d.DiskSizeGB = od.OSType, od.Caching, od.DiskSizeGB
			if od.ManagedDisk != nil {
				d.ManagedDisk = &armcompute.ManagedDiskParameters{StorageAccountType: od.ManagedDisk.StorageAccountType}
			}
		}
		DefaultVMOSDisk(vm.Properties.StorageProfile, name, guid)
	}
	return vm
}

func cloneTags(tags map[string]*string) map[string]*string {
	if tags == nil {
		return nil
	}
	out := make(map[string]*string, len(tags))
	for k, v := range tags {
		if v != nil {
			out[k] = to.Ptr(*v)
		}
	}
	return out
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func boolOf(p *bool) bool { return p != nil && *p }
