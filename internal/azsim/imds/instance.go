package imds

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// API versions IMDS uses to read the engine.
const (
	computeAPI   = "2025-04-01"
	networkAPI   = "2025-05-01"
	vmssNICAPI   = "2018-10-01"
	computeType  = "Microsoft.Compute/virtualMachines"
	scaleSetType = "Microsoft.Compute/virtualMachineScaleSets"
)

// Document is /metadata/instance. As in Azure, every primitive is a string.
type Document struct {
	Compute Compute `json:"compute"`
	Network Network `json:"network"`
}

// Compute is /metadata/instance/compute.
type Compute struct {
	AzEnvironment       string    `json:"azEnvironment"`
	Location            string    `json:"location"`
	Name                string    `json:"name"`
	Offer               string    `json:"offer"`
	OSType              string    `json:"osType"`
	OSProfile           OSProfile `json:"osProfile"`
	PlacementGroupID    string    `json:"placementGroupId"`
	PlatformFaultDomain string    `json:"platformFaultDomain"`
	// PlatformSubFaultDomain is only in the document of a VM given one (SetSubFaultDomain).
	PlatformSubFaultDomain string `json:"platformSubFaultDomain,omitempty"`
	PlatformUpdateDomain   string `json:"platformUpdateDomain"`
	Provider               string `json:"provider"`
	ResourceGroupName      string `json:"resourceGroupName"`
	ResourceID             string `json:"resourceId"`
	SKU                    string `json:"sku"`
	SubscriptionID         string `json:"subscriptionId"`
	Tags                   string `json:"tags"`
	TagsList               []Tag  `json:"tagsList"`
	VMID                   string `json:"vmId"`
	VMScaleSetName         string `json:"vmScaleSetName"`
	VMSize                 string `json:"vmSize"`
	Zone                   string `json:"zone"`
}

// OSProfile is compute.osProfile.
type OSProfile struct {
	AdminUsername                 string `json:"adminUsername"`
	ComputerName                  string `json:"computerName"`
	DisablePasswordAuthentication string `json:"disablePasswordAuthentication"`
}

// Tag is one entry of tagsList.
type Tag struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Network is /metadata/instance/network.
type Network struct {
	Interface []Interface `json:"interface"`
}

// Interface is one NIC.
type Interface struct {
	IPv4       IPFamily `json:"ipv4"`
	IPv6       IPFamily `json:"ipv6"`
	MacAddress string   `json:"macAddress"`
}

// IPFamily lists the addresses and subnets of one IP version.
type IPFamily struct {
	IPAddress []IPAddress `json:"ipAddress"`
	Subnet    []SubnetRef `json:"subnet"`
}

// IPAddress is one private address with its public one, if any.
type IPAddress struct {
	PrivateIPAddress string `json:"privateIpAddress"`
	PublicIPAddress  string `json:"publicIpAddress"`
}

// SubnetRef is a subnet as IMDS shows it.
type SubnetRef struct {
	Address string `json:"address"`
	Prefix  string `json:"prefix"`
}

// Instance builds the document of the VM selected by sel (name, computer name, "ss_id" or
// resource ID).
func (s *Server) Instance(ctx context.Context, sel string) (*Document, error) {
	c := reader{h: s.store}
	for _, raw := range s.store.ListResources(computeType) {
		var vm armcompute.VirtualMachine
		if json.Unmarshal(raw, &vm) != nil || !vmMatches(sel, str(vm.ID), str(vm.Name), vmComputerName(&vm)) {
			continue
		}
		if err := c.get(ctx, str(vm.ID)+"?$expand=instanceView&api-version="+computeAPI, &vm); err != nil {
			return nil, err
		}
		return s.vmDocument(ctx, c, &vm)
	}
	for _, raw := range s.store.ListResources(scaleSetType) {
		var ss armcompute.VirtualMachineScaleSet
		if json.Unmarshal(raw, &ss) != nil {
			continue
		}
		items, err := c.list(ctx, str(ss.ID)+"/virtualMachines?$expand=instanceView&api-version="+computeAPI)
		if err != nil {
			continue // Flexible scale sets have no instance collection; their VMs were listed above.
		}
		for _, it := range items {
			var vm armcompute.VirtualMachineScaleSetVM
			if json.Unmarshal(it, &vm) != nil {
				continue
			}
			cn := ""
			if vm.Properties != nil && vm.Properties.OSProfile != nil {
				cn = str(vm.Properties.OSProfile.ComputerName)
			}
			if !vmMatches(sel, str(vm.ID), str(vm.Name), cn) && !strings.EqualFold(sel, str(ss.Name)+"_"+str(vm.InstanceID)) {
				continue
			}
			return s.scaleSetVMDocument(ctx, c, &ss, &vm)
		}
	}
	return nil, fmt.Errorf("azsim: no VM or scale set instance matches %q", sel)
}

func vmMatches(sel, id, name, computerName string) bool {
	return strings.EqualFold(sel, id) || strings.EqualFold(sel, name) || (computerName != "" && strings.EqualFold(sel, computerName))
}

func vmComputerName(vm *armcompute.VirtualMachine) string {
	if vm.Properties != nil && vm.Properties.OSProfile != nil {
		return str(vm.Properties.OSProfile.ComputerName)
	}
	return ""
}

func (s *Server) baseCompute(id, name, location string, zones []*string, tags map[string]*string) Compute {
	c := Compute{
		AzEnvironment:        s.azEnvironm,
		Location:             strings.ToLower(location),
		Name:                 name,
		OSType:               "Linux",
		Provider:             "Microsoft.Compute",
		ResourceGroupName:    segmentAfter(id, "resourceGroups"),
		ResourceID:           id,
		SubscriptionID:       segmentAfter(id, "subscriptions"),
		TagsList:             []Tag{},
		PlatformFaultDomain:  "0",
		PlatformUpdateDomain: "0",
		OSProfile:            OSProfile{DisablePasswordAuthentication: "true"},
	}
	if len(zones) > 0 {
		c.Zone = str(zones[0])
	}
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var pairs []string
	for _, k := range keys {
		c.TagsList = append(c.TagsList, Tag{Name: k, Value: str(tags[k])})
		pairs = append(pairs, k+":"+str(tags[k]))
	}
	c.Tags = strings.Join(pairs, ";")
	return c
}

func (s *Server) vmDocument(ctx context.Context, c reader, vm *armcompute.VirtualMachine) (*Document, error) {
	comp := s.baseCompute(str(vm.ID), str(vm.Name), str(vm.Location), vm.Zones, vm.Tags)
	comp.PlatformSubFaultDomain = s.SubFaultDomain(str(vm.ID))
	var nicIDs []string
	if p := vm.Properties; p != nil {
		comp.VMID = str(p.VMID)
		if p.HardwareProfile != nil && p.HardwareProfile.VMSize != nil {
			comp.VMSize = string(*p.HardwareProfile.VMSize)
		}
		if p.OSProfile != nil {
			comp.OSProfile.ComputerName = str(p.OSProfile.ComputerName)
			comp.OSProfile.AdminUsername = str(p.OSProfile.AdminUsername)
		}
		if p.VirtualMachineScaleSet != nil {
			comp.VMScaleSetName = segmentAfter(str(p.VirtualMachineScaleSet.ID), "virtualMachineScaleSets")
		}
		if iv := p.InstanceView; iv != nil {
			comp.PlatformFaultDomain = itoa(iv.PlatformFaultDomain)
			comp.PlatformUpdateDomain = itoa(iv.PlatformUpdateDomain)
		}
		if p.NetworkProfile != nil {
			nicIDs = append(nicIDs, primaryFirst(p.NetworkProfile.NetworkInterfaces)...)
		}
	}
	var nics []armnetwork.Interface
	for _, id := range nicIDs {
		var nic armnetwork.Interface
		if err := c.get(ctx, id+"?api-version="+networkAPI, &nic); err != nil {
			return nil, err
		}
		nics = append(nics, nic)
	}
	return &Document{Compute: comp, Network: Network{Interface: c.interfaces(ctx, nics)}}, nil
}

func (s *Server) scaleSetVMDocument(ctx context.Context, c reader, ss *armcompute.VirtualMachineScaleSet, vm *armcompute.VirtualMachineScaleSetVM) (*Document, error) {
	comp := s.baseCompute(str(vm.ID), str(vm.Name), str(vm.Location), vm.Zones, vm.Tags)
	comp.PlatformSubFaultDomain = s.SubFaultDomain(str(vm.ID))
	comp.VMScaleSetName = str(ss.Name)
	if vm.SKU != nil {
		comp.VMSize = str(vm.SKU.Name)
	}
	if p := vm.Properties; p != nil {
		comp.VMID = str(p.VMID)
		if p.OSProfile != nil {
			comp.OSProfile.ComputerName = str(p.OSProfile.ComputerName)
			comp.OSProfile.AdminUsername = str(p.OSProfile.AdminUsername)
		}
		if p.HardwareProfile != nil && p.HardwareProfile.VMSize != nil && comp.VMSize == "" {
			comp.VMSize = string(*p.HardwareProfile.VMSize)
		}
		if iv := p.InstanceView; iv != nil {
			comp.PlatformFaultDomain = itoa(iv.PlatformFaultDomain)
			comp.PlatformUpdateDomain = itoa(iv.PlatformUpdateDomain)
		}
	}
	items, err := c.list(ctx, str(vm.ID)+"/networkInterfaces?api-version="+vmssNICAPI)
	if err != nil {
		return nil, err
	}
	var nics []armnetwork.Interface
	for _, it := range items {
		var nic armnetwork.Interface
		if err := json.Unmarshal(it, &nic); err != nil {
			return nil, err
		}
		nics = append(nics, nic)
	}
	sort.SliceStable(nics, func(i, j int) bool { return isPrimaryNIC(&nics[i]) && !isPrimaryNIC(&nics[j]) })
	return &Document{Compute: comp, Network: Network{Interface: c.interfaces(ctx, nics)}}, nil
}

func isPrimaryNIC(n *armnetwork.Interface) bool {
	return n.Properties != nil && n.Properties.Primary != nil && *n.Properties.Primary
}

func primaryFirst(refs []*armcompute.NetworkInterfaceReference) []string {
	var first, rest []string
	for _, r := range refs {
		if r == nil || r.ID == nil {
			continue
		}
		if r.Properties != nil && r.Properties.Primary != nil && *r.Properties.Primary {
			first = append(first, *r.ID)
		} else {
			rest = append(rest, *r.ID)
		}
	}
	return append(first, rest...)
}

// interfaces renders NICs as IMDS does; addresses of the primary configuration come first.
func (c reader) interfaces(ctx context.Context, nics []armnetwork.Interface) []Interface {
	out := []Interface{}
	for _, nic := range nics {
		it := Interface{IPv4: IPFamily{IPAddress: []IPAddress{}, Subnet: []SubnetRef{}}, IPv6: IPFamily{IPAddress: []IPAddress{}}}
		var cfgs []*armnetwork.InterfaceIPConfiguration
		if nic.Properties != nil {
			cfgs = nic.Properties.IPConfigurations
			it.MacAddress = strings.ToUpper(strings.NewReplacer("-", "", ":", "").Replace(str(nic.Properties.MacAddress)))
		}
		if it.MacAddress == "" {
			it.MacAddress = syntheticMAC(str(nic.ID))
		}
		sort.SliceStable(cfgs, func(i, j int) bool { return primaryCfg(cfgs[i]) && !primaryCfg(cfgs[j]) })
		seenSubnet := map[string]bool{}
		for _, cfg := range cfgs {
			p := cfg.Properties
			if p == nil || str(p.PrivateIPAddress) == "" {
				continue
			}
			addr := IPAddress{PrivateIPAddress: str(p.PrivateIPAddress)}
			if p.PublicIPAddress != nil && p.PublicIPAddress.ID != nil {
				var pip armnetwork.PublicIPAddress
				if c.get(ctx, *p.PublicIPAddress.ID+"?api-version="+networkAPI, &pip) == nil && pip.Properties != nil {
					addr.PublicIPAddress = str(pip.Properties.IPAddress)
				}
			}
			if strings.Contains(addr.PrivateIPAddress, ":") {
				it.IPv6.IPAddress = append(it.IPv6.IPAddress, addr)
				continue
			}
			it.IPv4.IPAddress = append(it.IPv4.IPAddress, addr)
			if p.Subnet != nil && p.Subnet.ID != nil && !seenSubnet[strings.ToLower(*p.Subnet.ID)] {
				seenSubnet[strings.ToLower(*p.Subnet.ID)] = true
				var sn armnetwork.Subnet
				if c.get(ctx, *p.Subnet.ID+"?api-version="+networkAPI, &sn) == nil && sn.Properties != nil {
					if ref, ok := ipv4Subnet(sn.Properties); ok {
						it.IPv4.Subnet = append(it.IPv4.Subnet, ref)
					}
				}
			}
		}
		out = append(out, it)
	}
	return out
}

func ipv4Subnet(p *armnetwork.SubnetPropertiesFormat) (SubnetRef, bool) {
	prefixes := []string{str(p.AddressPrefix)}
	for _, x := range p.AddressPrefixes {
		prefixes = append(prefixes, str(x))
	}
	for _, pf := range prefixes {
		if addr, bits, ok := strings.Cut(pf, "/"); ok && !strings.Contains(addr, ":") {
			return SubnetRef{Address: addr, Prefix: bits}, true
		}
	}
	return SubnetRef{}, false
}

func primaryCfg(c *armnetwork.InterfaceIPConfiguration) bool {
	return c != nil && c.Properties != nil && c.Properties.Primary != nil && *c.Properties.Primary
}

// syntheticMAC derives a stable Azure-style MAC (00-0D-3A prefix) from a NIC ID.
func syntheticMAC(id string) string {
	h := sha256.Sum256([]byte(strings.ToLower(id)))
	return fmt.Sprintf("000D3A%02X%02X%02X", h[0], h[1], h[2])
}

// reader GETs from the ARM handler in-process.
type reader struct{ h http.Handler }

func (c reader) get(ctx context.Context, pathQuery string, v any) error {
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://azsim.internal"+pathQuery, nil)
	if err != nil {
		return err
	}
	r.Header.Set("Authorization", "Bearer azsim-imds")
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, r)
	if rec.Code != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", pathQuery, rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	return json.Unmarshal(rec.Body.Bytes(), v)
}

func (c reader) list(ctx context.Context, pathQuery string) ([]json.RawMessage, error) {
	var out []json.RawMessage
	for pathQuery != "" {
		var page struct {
			Value    []json.RawMessage `json:"value"`
			NextLink string            `json:"nextLink"`
		}
		if err := c.get(ctx, pathQuery, &page); err != nil {
			return nil, err
		}
		out = append(out, page.Value...)
		pathQuery = ""
		if page.NextLink != "" {
			if u, err := url.Parse(page.NextLink); err == nil {
				pathQuery = u.EscapedPath() + "?" + u.RawQuery
			}
		}
	}
	return out, nil
}

func segmentAfter(id, key string) string {
	parts := strings.Split(id, "/")
	for i := 0; i+1 < len(parts); i++ {
		if strings.EqualFold(parts[i], key) {
			return parts[i+1]
		}
	}
	return ""
}

func itoa(p *int32) string {
	if p == nil {
		return "0"
	}
	return strconv.Itoa(int(*p))
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func sortStrings(s []string) { sort.Strings(s) }
