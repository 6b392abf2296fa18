package topology

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// Result is what a seed produced.
type Result struct {
	SubscriptionID string    `json:"subscriptionId"`
	Location       string    `json:"location"`
	Machines       []Machine `json:"machines"`
	// PrivateLinkServices and PrivateEndpoints the topology named, in its order.
	PrivateLinkServices []SeededPrivateLinkService `json:"privateLinkServices,omitempty"`
	PrivateEndpoints    []SeededPrivateEndpoint    `json:"privateEndpoints,omitempty"`
}

// Machine is one VM or scale set instance, as a Kubernetes Node would represent it.
type Machine struct {
	// NodeName is the OS computer name, lower-cased (the kubelet's node name).
	NodeName string `json:"nodeName"`
	// ProviderID is azure:///subscriptions/<sub>/resourceGroups/<rg lower-case>/providers/
	// Microsoft.Compute/virtualMachines/<name> or .../virtualMachineScaleSets/<ss>/virtualMachines/<id>.
	ProviderID    string `json:"providerID"`
	ResourceID    string `json:"resourceID"`
	Name          string `json:"name"`
	ResourceGroup string `json:"resourceGroup"`
	// ScaleSet is the scale set name ("" for standalone and availability-set VMs).
	ScaleSet string `json:"scaleSet,omitempty"`
	// InstanceID is the Uniform instance ID ("" otherwise).
	InstanceID      string `json:"instanceID,omitempty"`
	AvailabilitySet string `json:"availabilitySet,omitempty"`
	VMSize          string `json:"vmSize"`
	// Zone is the zone number ("1"), "" when the machine is not zonal.
	Zone        string `json:"zone"`
	Region      string `json:"region"`
	FaultDomain int    `json:"faultDomain"`
	// InternalIPs are the primary NIC's private addresses, primary configuration first.
	InternalIPs []string `json:"internalIPs"`
	PowerState  string   `json:"powerState,omitempty"`
}

// Collect reads every machine of a normalized topology back from the engine.
func Collect(ctx context.Context, h http.Handler, t *Topology, opts SeedOptions) (*Result, error) {
	c := &caller{h: h, opts: opts}
	res := &Result{SubscriptionID: t.SubscriptionID, Location: t.Location, Machines: []Machine{}}
	for _, s := range t.ScaleSets {
		ssID := resID(t.SubscriptionID, s.ResourceGroup, "Microsoft.Compute/virtualMachineScaleSets", s.Name)
		var ms []Machine
		var err error
		if s.Orchestration == "Flexible" {
			ms, err = c.flexMachines(ctx, t, s, ssID)
		} else {
			ms, err = c.uniformMachines(ctx, ssID)
		}
		if err != nil {
			return nil, fmt.Errorf("scale set %s: %w", s.Name, err)
		}
		res.Machines = append(res.Machines, ms...)
	}
	for _, a := range t.AvailabilitySets {
		for i := 0; i < a.VMs; i++ {
			m, err := c.vmMachine(ctx, resID(t.SubscriptionID, a.ResourceGroup, "Microsoft.Compute/virtualMachines", fmt.Sprintf("%s%d", a.VMNamePrefix, i)))
			if err != nil {
				return nil, err
			}
			res.Machines = append(res.Machines, m)
		}
	}
	for _, v := range t.VirtualMachines {
		m, err := c.vmMachine(ctx, resID(t.SubscriptionID, v.ResourceGroup, "Microsoft.Compute/virtualMachines", v.Name))
		if err != nil {
			return nil, err
		}
		res.Machines = append(res.Machines, m)
	}
	if err := c.collectPrivateLink(ctx, t, res); err != nil {
		return nil, err
	}
	return res, nil
}

func (c *caller) uniformMachines(ctx context.Context, ssID string) ([]Machine, error) {
	items, err := c.list(ctx, ssID+"/virtualMachines?api-version="+ComputeAPIVersion+"&$expand=instanceView")
	if err != nil {
		return nil, err
	}
	var out []Machine
	for _, raw := range items {
		var vm armcompute.VirtualMachineScaleSetVM
		if err := json.Unmarshal(raw, &vm); err != nil {
			return nil, err
		}
		m := uniformMachine(&vm)
		nics, err := c.list(ctx, str(vm.ID)+"/networkInterfaces?api-version=2018-10-01")
		if err != nil {
			return nil, err
		}
		m.InternalIPs, err = primaryIPs(nics)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return instanceLess(out[i].InstanceID, out[j].InstanceID) })
	return out, nil
}

func instanceLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// uniformMachine maps a scale set instance (without addresses).
func uniformMachine(vm *armcompute.VirtualMachineScaleSetVM) Machine {
	id := str(vm.ID)
	m := Machine{
		ResourceID:    id,
		ProviderID:    ProviderID(id),
		Name:          str(vm.Name),
		ResourceGroup: segmentAfter(id, "resourceGroups"),
		ScaleSet:      segmentAfter(id, "virtualMachineScaleSets"),
		InstanceID:    str(vm.InstanceID),
		Region:        strings.ToLower(str(vm.Location)),
	}
	if vm.SKU != nil {
		m.VMSize = str(vm.SKU.Name)
	}
	if len(vm.Zones) > 0 {
		m.Zone = str(vm.Zones[0])
	}
	if p := vm.Properties; p != nil {
		if p.OSProfile != nil {
			m.NodeName = strings.ToLower(str(p.OSProfile.ComputerName))
		}
		if p.HardwareProfile != nil && p.HardwareProfile.VMSize != nil && m.VMSize == "" {
			m.VMSize = string(*p.HardwareProfile.VMSize)
		}
		if iv := p.InstanceView; iv != nil {
			if iv.PlatformFaultDomain != nil {
				m.FaultDomain = int(*iv.PlatformFaultDomain)
			}
			if m.NodeName == "" {
				m.NodeName = strings.ToLower(str(iv.ComputerName))
			}
			m.PowerState = powerOf(iv.Statuses)
		}
	}
	return m
}

func (c *caller) flexMachines(ctx context.Context, t *Topology, s ScaleSet, ssID string) ([]Machine, error) {
	items, err := c.list(ctx, rgID(t.SubscriptionID, s.ResourceGroup)+"/providers/Microsoft.Compute/virtualMachines?api-version="+ComputeAPIVersion)
	if err != nil {
		return nil, err
	}
	var out []Machine
	for _, raw := range items {
		var vm armcompute.VirtualMachine
		if err := json.Unmarshal(raw, &vm); err != nil {
			return nil, err
		}
		if vm.Properties == nil || vm.Properties.VirtualMachineScaleSet == nil || !strings.EqualFold(str(vm.Properties.VirtualMachineScaleSet.ID), ssID) {
			continue
		}
		m, err := c.vmMachine(ctx, str(vm.ID))
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (c *caller) vmMachine(ctx context.Context, id string) (Machine, error) {
	var vm armcompute.VirtualMachine
	if err := c.getJSON(ctx, id+"?api-version="+ComputeAPIVersion+"&$expand=instanceView", &vm); err != nil {
		return Machine{}, err
	}
	m := vmMachine(&vm)
	nicID := primaryNICID(&vm)
	if nicID == "" {
		return m, nil
	}
	var nic json.RawMessage
	if err := c.getJSON(ctx, nicID+"?api-version="+NetworkAPIVersion, &nic); err != nil {
		return Machine{}, err
	}
	ips, err := primaryIPs([]json.RawMessage{nic})
	if err != nil {
		return Machine{}, err
	}
	m.InternalIPs = ips
	return m, nil
}

// vmMachine maps a standalone, availability-set or Flexible VM (without addresses).
func vmMachine(vm *armcompute.VirtualMachine) Machine {
	id := str(vm.ID)
	m := Machine{
		ResourceID:    id,
		ProviderID:    ProviderID(id),
		Name:          str(vm.Name),
		ResourceGroup: segmentAfter(id, "resourceGroups"),
		Region:        strings.ToLower(str(vm.Location)),
	}
	if len(vm.Zones) > 0 {
		m.Zone = str(vm.Zones[0])
	}
	if p := vm.Properties; p != nil {
		if p.OSProfile != nil {
			m.NodeName = strings.ToLower(str(p.OSProfile.ComputerName))
		}
		if p.HardwareProfile != nil && p.HardwareProfile.VMSize != nil {
			m.VMSize = string(*p.HardwareProfile.VMSize)
		}
		if p.VirtualMachineScaleSet != nil {
			m.ScaleSet = segmentAfter(str(p.VirtualMachineScaleSet.ID), "virtualMachineScaleSets")
		}
		if p.AvailabilitySet != nil {
			m.AvailabilitySet = segmentAfter(str(p.AvailabilitySet.ID), "availabilitySets")
		}
		if iv := p.InstanceView; iv != nil {
			if iv.PlatformFaultDomain != nil {
				m.FaultDomain = int(*iv.PlatformFaultDomain)
			}
			if m.NodeName == "" {
				m.NodeName = strings.ToLower(str(iv.ComputerName))
			}
			m.PowerState = powerOf(iv.Statuses)
		}
	}
	if m.NodeName == "" {
		m.NodeName = strings.ToLower(m.Name)
	}
	return m
}

func primaryNICID(vm *armcompute.VirtualMachine) string {
	if vm.Properties == nil || vm.Properties.NetworkProfile == nil {
		return ""
	}
	nics := vm.Properties.NetworkProfile.NetworkInterfaces
	for _, n := range nics {
		if n.Properties != nil && n.Properties.Primary != nil && *n.Properties.Primary {
			return str(n.ID)
		}
	}
	if len(nics) > 0 {
		return str(nics[0].ID)
	}
	return ""
}

// primaryIPs returns the private addresses of the primary NIC among nics: the primary IP
// configuration first, then IPv4 before IPv6.
func primaryIPs(nics []json.RawMessage) ([]string, error) {
	var chosen *armnetwork.Interface
	for _, raw := range nics {
		var nic armnetwork.Interface
		if err := json.Unmarshal(raw, &nic); err != nil {
			return nil, err
		}
		if chosen == nil || (nic.Properties != nil && nic.Properties.Primary != nil && *nic.Properties.Primary) {
			n := nic
			chosen = &n
		}
	}
	if chosen == nil || chosen.Properties == nil {
		return nil, nil
	}
	type ip struct {
		addr    string
		primary bool
		v6      bool
	}
	var ips []ip
	for _, cfg := range chosen.Properties.IPConfigurations {
		p := cfg.Properties
		if p == nil || p.PrivateIPAddress == nil || *p.PrivateIPAddress == "" {
			continue
		}
		ips = append(ips, ip{*p.PrivateIPAddress, p.Primary != nil && *p.Primary, strings.Contains(*p.PrivateIPAddress, ":")})
	}
	sort.SliceStable(ips, func(i, j int) bool {
		if ips[i].primary != ips[j].primary {
			return ips[i].primary
		}
		return !ips[i].v6 && ips[j].v6
	})
	out := make([]string, 0, len(ips))
	for _, x := range ips {
		out = append(out, x.addr)
	}
	return out, nil
}

func powerOf(statuses []*armcompute.InstanceViewStatus) string {
	for _, s := range statuses {
		if s != nil && s.Code != nil && strings.HasPrefix(*s.Code, "PowerState/") {
			return strings.TrimPrefix(*s.Code, "PowerState/")
		}
	}
	return ""
}

// segmentAfter returns the ID segment after key (case-insensitive).
func segmentAfter(id, key string) string {
	parts := strings.Split(id, "/")
	for i := 0; i+1 < len(parts); i++ {
		if strings.EqualFold(parts[i], key) {
			return parts[i+1]
		}
	}
	return ""
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// SubFaultDomain is the sub fault domain the topology gives machine m (that of its scale set,
// availability set or standalone VM; "" if none).
func (t *Topology) SubFaultDomain(m Machine) string {
	for _, ss := range t.ScaleSets {
		if m.ScaleSet != "" && strings.EqualFold(ss.Name, m.ScaleSet) && strings.EqualFold(ss.ResourceGroup, m.ResourceGroup) {
			return ss.SubFaultDomain
		}
	}
	for _, as := range t.AvailabilitySets {
		if m.AvailabilitySet != "" && strings.EqualFold(as.Name, m.AvailabilitySet) && strings.EqualFold(as.ResourceGroup, m.ResourceGroup) {
			return as.SubFaultDomain
		}
	}
	for _, vm := range t.VirtualMachines {
		if m.ScaleSet == "" && m.AvailabilitySet == "" && strings.EqualFold(vm.Name, m.Name) && strings.EqualFold(vm.ResourceGroup, m.ResourceGroup) {
			return vm.SubFaultDomain
		}
	}
	return ""
}
