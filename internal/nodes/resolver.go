package nodes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/config"
)

// ErrInstanceNotFound is returned when a node has no VM. The cloud-provider interface
// (internal/provider) answers it as cloudprovider.InstanceNotFound: this package does not import
// k8s.io/cloud-provider, whose import graph (client-go) would otherwise be compiled into every
// build of it, its fuzz-instrumented test binary included.
var ErrInstanceNotFound = errors.New("ARM has no such VM")

// Resolver maps nodes to VMs through the list caches of the ARM access layer: initialising N
// nodes of one scale set costs one LIST of that scale set's VMs and one of its NICs, not N GETs.
type Resolver struct {
	cfg    *config.Config
	caches *arm.Caches
	nodes  *NodeMap
}

// NewResolver creates a resolver. nodes may be nil (no informer: lookups by node name use the
// configured resource group).
func NewResolver(cfg *config.Config, caches *arm.Caches, nodes *NodeMap) *Resolver {
	if nodes == nil {
		nodes = NewNodeMap()
	}
	return &Resolver{cfg: cfg, caches: caches, nodes: nodes}
}

// Nodes returns the informer-maintained node map.
func (r *Resolver) Nodes() *NodeMap { return r.nodes }

// ExclusionReason says why a node must stay out of load balancers ("" if it may join): on-prem,
// other resource group, the exclude labels, or a control-plane node when
// excludeMasterFromStandardLB applies.
func (r *Resolver) ExclusionReason(node *v1.Node) string {
	if reason := ExclusionReason(node, r.cfg.ResourceGroup); reason != "" {
		return reason
	}
	if r.cfg.IsStandardSKU() && r.cfg.ExcludeMasters() {
		for _, l := range []string{"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"} {
			if _, ok := node.Labels[l]; ok {
				return "control-plane node (excludeMasterFromStandardLB)"
			}
		}
		if node.Labels["kubernetes.io/role"] == "master" {
			return "control-plane node (excludeMasterFromStandardLB)"
		}
	}
	return ""
}

// IsExcludedFromLB reports whether a node must stay out of load balancers.
func (r *Resolver) IsExcludedFromLB(node *v1.Node) bool { return r.ExclusionReason(node) != "" }

// Instance finds the VM of a node: by spec.providerID when set, otherwise by node name in the
// node's resource group. On-prem nodes return an unmanaged instance without any ARM call.
func (r *Resolver) Instance(ctx context.Context, node *v1.Node) (*Instance, error) {
	if IsUnmanaged(node) {
		return &Instance{ProviderID: ProviderID{Kind: KindUnmanaged, Name: node.Name}, VMSet: VMSet{Kind: VMSetUnmanaged}}, nil
	}
	if node.Spec.ProviderID != "" {
		return r.InstanceByProviderID(ctx, node.Spec.ProviderID)
	}
	rg := ResourceGroupOf(node, r.cfg.ResourceGroup)
	if label := node.Labels[LabelResourceGroup]; label != "" && !resourceGroupName.MatchString(label) {
		// A label typo must not become ARM lookups (or a 400 retried forever): say what is wrong.
		return nil, fmt.Errorf("label %s=%q is not a resource group name", LabelResourceGroup, label)
	}
	return r.InstanceByName(ctx, node.Name, rg)
}

// resourceGroupName is ARM's rule: 1-90 of letters, digits, '_', '-', '.', '(' and ')', not ending in '.'.
var resourceGroupName = regexp.MustCompile(`^[-\w._()]{0,89}[-\w_()]$`)

// InstanceByProviderID finds a VM from its provider ID.
func (r *Resolver) InstanceByProviderID(ctx context.Context, providerID string) (*Instance, error) {
	p, err := ParseProviderID(providerID)
	if err != nil {
		return nil, err
	}
	switch p.Kind {
	case KindUnmanaged:
		return &Instance{ProviderID: p, VMSet: VMSet{Kind: VMSetUnmanaged}}, nil
	case KindScaleSetVM:
		vm, ok, err := r.caches.ScaleSetVMs.Lookup(ctx, arm.ScaleSetKey(p.ResourceGroup, p.ScaleSet),
			func(vm *armcompute.VirtualMachineScaleSetVM) bool {
				return strings.EqualFold(str(vm.InstanceID), p.InstanceID)
			})
		if err != nil {
			return nil, fmt.Errorf("listing VMs of scale set %s/%s: %w", p.ResourceGroup, p.ScaleSet, err)
		}
		if !ok {
			return nil, fmt.Errorf("%s: %w", providerID, ErrInstanceNotFound)
		}
		inst := InstanceFromScaleSetVM(vm, p.ResourceGroup, p.ScaleSet, p.SubscriptionID)
		return &inst, nil
	default:
		vm, ok, err := r.caches.VMs.Lookup(ctx, p.ResourceGroup,
			func(vm *armcompute.VirtualMachine) bool { return strings.EqualFold(str(vm.Name), p.Name) })
		if err != nil {
			return nil, fmt.Errorf("listing VMs of resource group %s: %w", p.ResourceGroup, err)
		}
		if !ok {
			return nil, fmt.Errorf("%s: %w", providerID, ErrInstanceNotFound)
		}
		inst := InstanceFromVM(vm, r.cfg.SubscriptionID)
		return &inst, nil
	}
}

// InstanceByName finds the VM of a node that has no providerID yet: a VM named like the node
// (or with that computer name), else a Uniform scale set instance with that computer name.
// Cached lists are searched first; only then are lists refreshed, scale sets whose
// computerNamePrefix fits the node name first.
func (r *Resolver) InstanceByName(ctx context.Context, name, rg string) (*Instance, error) {
	matchVM := func(vm *armcompute.VirtualMachine) bool {
		return strings.EqualFold(str(vm.Name), name) || (vm.Properties != nil && vm.Properties.OSProfile != nil &&
			strings.EqualFold(str(vm.Properties.OSProfile.ComputerName), name))
	}
	matchSSVM := func(vm *armcompute.VirtualMachineScaleSetVM) bool {
		return vm.Properties != nil && vm.Properties.OSProfile != nil &&
			strings.EqualFold(str(vm.Properties.OSProfile.ComputerName), name)
	}
	searchVMs := r.cfg.VMType != config.VMTypeVMSS || !r.cfg.DisableAvailabilitySetNodes || r.cfg.EnableVmssFlexNodes
	var preferred, others []string
	if r.cfg.VMType != config.VMTypeStandard {
		sets, err := r.caches.ScaleSets.Get(ctx, rg)
		if err != nil {
			return nil, fmt.Errorf("listing scale sets of resource group %s: %w", rg, err)
		}
		for _, ss := range sets {
			if isFlexible(ss) {
				continue
			}
			prefix := ""
			if ss.Properties != nil && ss.Properties.VirtualMachineProfile != nil && ss.Properties.VirtualMachineProfile.OSProfile != nil {
				prefix = str(ss.Properties.VirtualMachineProfile.OSProfile.ComputerNamePrefix)
			}
			if prefix != "" && strings.HasPrefix(strings.ToLower(name), strings.ToLower(prefix)) {
				preferred = append(preferred, str(ss.Name))
			} else {
				others = append(others, str(ss.Name))
			}
		}
	}
	// Pass 1: what is cached (or listed for the first time).
	for _, ss := range preferred {
		vms, err := r.caches.ScaleSetVMs.Get(ctx, arm.ScaleSetKey(rg, ss))
		if err != nil {
			return nil, fmt.Errorf("listing VMs of scale set %s/%s: %w", rg, ss, err)
		}
		for _, vm := range vms {
			if matchSSVM(vm) {
				inst := InstanceFromScaleSetVM(vm, rg, ss, r.cfg.SubscriptionID)
				return &inst, nil
			}
		}
	}
	if searchVMs {
		vms, err := r.caches.VMs.Get(ctx, rg)
		if err != nil {
			return nil, fmt.Errorf("listing VMs of resource group %s: %w", rg, err)
		}
		for _, vm := range vms {
			if matchVM(vm) {
				inst := InstanceFromVM(vm, r.cfg.SubscriptionID)
				return &inst, nil
			}
		}
	}
	// Pass 2: refresh (rate-limited per list by the cache).
	for _, ss := range append(preferred, others...) {
		vm, ok, err := r.caches.ScaleSetVMs.Lookup(ctx, arm.ScaleSetKey(rg, ss), matchSSVM)
		if err != nil {
			return nil, fmt.Errorf("listing VMs of scale set %s/%s: %w", rg, ss, err)
		}
		if ok {
			inst := InstanceFromScaleSetVM(vm, rg, ss, r.cfg.SubscriptionID)
			return &inst, nil
		}
	}
	if searchVMs {
		vm, ok, err := r.caches.VMs.Lookup(ctx, rg, matchVM)
		if err != nil {
			return nil, fmt.Errorf("listing VMs of resource group %s: %w", rg, err)
		}
		if ok {
			inst := InstanceFromVM(vm, r.cfg.SubscriptionID)
			return &inst, nil
		}
	}
	return nil, fmt.Errorf("node %s in resource group %s: %w", name, rg, ErrInstanceNotFound)
}

func isFlexible(ss *armcompute.VirtualMachineScaleSet) bool {
	return ss.Properties != nil && ss.Properties.OrchestrationMode != nil &&
		*ss.Properties.OrchestrationMode == armcompute.OrchestrationModeFlexible
}

// IPConfiguration is one ip configuration of a node's primary NIC.
type IPConfiguration struct {
	// ID is the ip configuration's resource ID (what NIC-based backend pools reference).
	ID        string
	Name      string
	NICID     string
	Primary   bool
	PrivateIP string
	IPv6      bool
	// PublicIPID is the instance-level public IP, if any.
	PublicIPID string
}

// NICs returns the VM's network interfaces, primary first.
func (r *Resolver) NICs(ctx context.Context, inst *Instance) ([]*armnetwork.Interface, error) {
	var out []*armnetwork.Interface
	for _, id := range inst.NICIDs {
		match := func(n *armnetwork.Interface) bool { return strings.EqualFold(str(n.ID), id) }
		var (
			nic *armnetwork.Interface
			ok  bool
			err error
		)
		if inst.ProviderID.Kind == KindScaleSetVM {
			nic, ok, err = r.caches.ScaleSetNICs.Lookup(ctx, arm.ScaleSetKey(inst.VMSet.ResourceGroup, inst.VMSet.Name), match)
		} else {
			nic, ok, err = r.caches.NICs.Lookup(ctx, ResourceGroupOfID(id), match)
		}
		if err != nil {
			return nil, fmt.Errorf("listing network interfaces for %s: %w", id, err)
		}
		if ok {
			out = append(out, nic)
		}
	}
	// A NIC marked primary wins over the VM's reference order.
	for i, n := range out {
		if n.Properties != nil && n.Properties.Primary != nil && *n.Properties.Primary && i > 0 {
			out[0], out[i] = out[i], out[0]
			break
		}
	}
	return out, nil
}

// IPConfigurations returns the ip configurations of the primary NIC, primary first.
func (r *Resolver) IPConfigurations(ctx context.Context, inst *Instance) ([]IPConfiguration, error) {
	if inst.ProviderID.Kind == KindUnmanaged {
		return nil, nil
	}
	nics, err := r.NICs(ctx, inst)
	if err != nil {
		return nil, err
	}
	if len(nics) == 0 {
		return nil, fmt.Errorf("VM %s has no network interface", inst.ProviderID)
	}
	return ipConfigurationsOf(nics[0]), nil
}

func ipConfigurationsOf(nic *armnetwork.Interface) []IPConfiguration {
	if nic.Properties == nil {
		return nil
	}
	var primary, others []IPConfiguration
	for _, c := range nic.Properties.IPConfigurations {
		if c == nil {
			continue
		}
		ic := IPConfiguration{ID: str(c.ID), Name: str(c.Name), NICID: str(nic.ID)}
		if p := c.Properties; p != nil {
			ic.Primary = p.Primary != nil && *p.Primary
			ic.PrivateIP = str(p.PrivateIPAddress)
			if p.PrivateIPAddressVersion != nil {
				ic.IPv6 = *p.PrivateIPAddressVersion == armnetwork.IPVersionIPv6
			} else if ip := net.ParseIP(ic.PrivateIP); ip != nil {
				ic.IPv6 = ip.To4() == nil
			}
			if p.PublicIPAddress != nil {
				ic.PublicIPID = str(p.PublicIPAddress.ID)
			}
		}
		if ic.Primary {
			primary = append(primary, ic)
		} else {
			others = append(others, ic)
		}
	}
	return append(primary, others...)
}

// Addresses returns the node addresses: the primary NIC's private IPs as InternalIP (primary
// ip configuration first; IPv4 and IPv6), instance-level public IPs as ExternalIP (as the
// existing provider does), and the node name as Hostname.
func (r *Resolver) Addresses(ctx context.Context, inst *Instance, nodeName string) ([]v1.NodeAddress, error) {
	if inst.ProviderID.Kind == KindUnmanaged {
		return nil, nil
	}
	configs, err := r.IPConfigurations(ctx, inst)
	if err != nil {
		return nil, err
	}
	var internal, external []v1.NodeAddress
	for _, c := range configs {
		if c.PrivateIP != "" {
			internal = append(internal, v1.NodeAddress{Type: v1.NodeInternalIP, Address: c.PrivateIP})
		}
		if c.PublicIPID == "" {
			continue
		}
		ip, err := r.publicIP(ctx, inst, c.PublicIPID)
		if err != nil {
			return nil, err
		}
		if ip != "" {
			external = append(external, v1.NodeAddress{Type: v1.NodeExternalIP, Address: ip})
		}
	}
	if len(internal) == 0 {
		return nil, fmt.Errorf("VM %s has no private IP on its primary network interface", inst.ProviderID)
	}
	out := append(internal, external...)
	return append(out, v1.NodeAddress{Type: v1.NodeHostName, Address: nodeName}), nil
}

func (r *Resolver) publicIP(ctx context.Context, inst *Instance, id string) (string, error) {
	match := func(p *armnetwork.PublicIPAddress) bool { return strings.EqualFold(str(p.ID), id) }
	var (
		pip *armnetwork.PublicIPAddress
		ok  bool
		err error
	)
	if inst.ProviderID.Kind == KindScaleSetVM {
		pip, ok, err = r.caches.ScaleSetPublicIPs.Lookup(ctx, arm.ScaleSetKey(inst.VMSet.ResourceGroup, inst.VMSet.Name), match)
	} else {
		pip, ok, err = r.caches.PublicIPs.Lookup(ctx, ResourceGroupOfID(id), match)
	}
	if err != nil {
		return "", fmt.Errorf("reading public IP %s: %w", id, err)
	}
	if !ok || pip.Properties == nil {
		return "", nil
	}
	return str(pip.Properties.IPAddress), nil
}

// VMSetOf returns the availability set or scale set of a node.
func (r *Resolver) VMSetOf(ctx context.Context, node *v1.Node) (VMSet, error) {
	inst, err := r.Instance(ctx, node)
	if err != nil {
		return VMSet{}, err
	}
	return inst.VMSet, nil
}

// NICIPConfigurationsOf returns the ip configurations of a node's primary NIC.
func (r *Resolver) NICIPConfigurationsOf(ctx context.Context, node *v1.Node) ([]IPConfiguration, error) {
	inst, err := r.Instance(ctx, node)
	if err != nil {
		return nil, err
	}
	return r.IPConfigurations(ctx, inst)
}

// BackendTarget is what a load balancer backend pool needs to know about a node.
type BackendTarget struct {
	Node  string
	VMSet VMSet
	// ProviderID of the VM.
	ProviderID string
	// IPConfigurations of the primary NIC (NIC-based pools reference their IDs).
	IPConfigurations []IPConfiguration
	// IPv4 and IPv6 are the primary private addresses (IP-based pools).
	IPv4, IPv6 string
}

// BackendTargetOf resolves a node for the load balancer writers. On-prem nodes are an error:
// callers filter them with IsExcludedFromLB first.
func (r *Resolver) BackendTargetOf(ctx context.Context, node *v1.Node) (BackendTarget, error) {
	inst, err := r.Instance(ctx, node)
	if err != nil {
		return BackendTarget{}, err
	}
	if inst.ProviderID.Kind == KindUnmanaged {
		return BackendTarget{}, fmt.Errorf("node %s is not an Azure VM", node.Name)
	}
	configs, err := r.IPConfigurations(ctx, inst)
	if err != nil {
		return BackendTarget{}, err
	}
	t := BackendTarget{Node: node.Name, VMSet: inst.VMSet, ProviderID: inst.ProviderID.String(), IPConfigurations: configs}
	for _, c := range configs {
		if c.IPv6 && t.IPv6 == "" {
			t.IPv6 = c.PrivateIP
		} else if !c.IPv6 && t.IPv4 == "" {
			t.IPv4 = c.PrivateIP
		}
	}
	return t, nil
}
