package topology

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
)

const sample = `
subscriptionId: 00000000-0000-0000-0000-000000000001
location: East US
resourceGroups: [rg-cluster]
virtualNetworks:
- resourceGroup: rg-cluster
  name: vnet
  addressPrefixes: [10.0.0.0/8, "fd00::/48"]
  subnets:
  - {name: subnet, addressPrefix: 10.240.0.0/16, addressPrefixV6: "fd00:0:0:1::/64", networkSecurityGroup: nsg, routeTable: rt}
networkSecurityGroups: [{resourceGroup: rg-cluster, name: nsg}]
routeTables: [{resourceGroup: rg-cluster, name: rt}]
scaleSets:
- {resourceGroup: rg-cluster, name: pool1, capacity: 3, zones: ["1","2","3"], ipv6: true, powerState: deallocated}
- {resourceGroup: rg-cluster, name: flex1, orchestration: flexible, capacity: 1}
availabilitySets:
- {resourceGroup: rg-cluster, name: as1, vms: 2}
virtualMachines:
- {resourceGroup: rg-other, name: other-vm-0, zone: "2", subnet: {vnet: vnet}}
`

func TestParseNormalizePlan(t *testing.T) {
	topo, err := Parse([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	n, err := topo.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	if n.Location != "eastus" {
		t.Errorf("location = %q", n.Location)
	}
	if strings.Join(n.ResourceGroups, ",") != "rg-cluster,rg-other" {
		t.Errorf("resource groups = %v", n.ResourceGroups)
	}
	ss := n.ScaleSets[0]
	if ss.Orchestration != "Uniform" || ss.VMSize != DefaultVMSize || ss.ComputerNamePrefix != "pool1" ||
		ss.Subnet != (SubnetRef{"rg-cluster", "vnet", "subnet"}) || ss.PowerState != "deallocated" {
		t.Errorf("scale set defaults: %+v", ss)
	}
	if n.ScaleSets[1].Orchestration != "Flexible" {
		t.Errorf("flexible: %+v", n.ScaleSets[1])
	}
	if vm := n.VirtualMachines[0]; vm.Subnet.ResourceGroup != "rg-cluster" || vm.ComputerName != "other-vm-0" {
		t.Errorf("vm defaults: %+v", vm)
	}
	if topo.ScaleSets[0].VMSize != "" {
		t.Error("Normalize changed its receiver")
	}

	var got []string
	for _, r := range Plan(n) {
		got = append(got, r.Method+" "+r.Path[strings.Index(r.Path, "/resourceGroups/")+len("/resourceGroups/"):])
	}
	want := []string{
		"PUT rg-cluster",
		"PUT rg-other",
		"PUT rg-cluster/providers/Microsoft.Network/networkSecurityGroups/nsg",
		"PUT rg-cluster/providers/Microsoft.Network/routeTables/rt",
		"PUT rg-cluster/providers/Microsoft.Network/virtualNetworks/vnet",
		"PUT rg-cluster/providers/Microsoft.Compute/availabilitySets/as1",
		"PUT rg-cluster/providers/Microsoft.Network/networkInterfaces/as1-vm-0-nic",
		"PUT rg-cluster/providers/Microsoft.Compute/virtualMachines/as1-vm-0",
		"PUT rg-cluster/providers/Microsoft.Network/networkInterfaces/as1-vm-1-nic",
		"PUT rg-cluster/providers/Microsoft.Compute/virtualMachines/as1-vm-1",
		"PUT rg-cluster/providers/Microsoft.Compute/virtualMachineScaleSets/pool1",
		"PUT rg-cluster/providers/Microsoft.Compute/virtualMachineScaleSets/flex1",
		"PUT rg-other/providers/Microsoft.Network/networkInterfaces/other-vm-0-nic",
		"PUT rg-other/providers/Microsoft.Compute/virtualMachines/other-vm-0",
		"POST rg-cluster/providers/Microsoft.Compute/virtualMachineScaleSets/pool1/deallocate",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("plan:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// The scale set body decodes as the SDK model with the fields compute needs.
	for _, r := range Plan(n) {
		if !strings.HasSuffix(r.Path, "/virtualMachineScaleSets/pool1") {
			continue
		}
		b, _ := json.Marshal(r.Body)
		var m armcompute.VirtualMachineScaleSet
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if *m.SKU.Capacity != 3 || len(m.Zones) != 3 || *m.Properties.OrchestrationMode != armcompute.OrchestrationModeUniform ||
			*m.Properties.VirtualMachineProfile.OSProfile.ComputerNamePrefix != "pool1" ||
			len(m.Properties.VirtualMachineProfile.NetworkProfile.NetworkInterfaceConfigurations[0].Properties.IPConfigurations) != 2 {
			t.Errorf("scale set body: %s", b)
		}
	}
}

func TestNormalizeErrors(t *testing.T) {
	base := `
virtualNetworks: [{resourceGroup: rg, name: vnet, addressPrefixes: [10.0.0.0/8], subnets: [{name: s, addressPrefix: 10.0.0.0/16}]}]
`
	for _, tc := range []struct{ name, extra, want string }{
		{"unknown field", "scaleSet: []", "unknown field"},
		{"bad orchestration", "scaleSets: [{resourceGroup: rg, name: a, orchestration: Mixed}]", "orchestration"},
		{"missing subnet", "scaleSets: [{resourceGroup: rg, name: a, subnet: {name: nope}}]", "subnet nope not found"},
		{"missing vnet", "virtualMachines: [{resourceGroup: rg, name: a, subnet: {vnet: other}}]", "virtualNetwork"},
		{"ipv6 without v6 prefix", "virtualMachines: [{resourceGroup: rg, name: a, ipv6: true}]", "addressPrefixV6"},
		{"bad power state", "virtualMachines: [{resourceGroup: rg, name: a, powerState: sleeping}]", "powerState"},
		{"no name", "virtualMachines: [{resourceGroup: rg}]", "needs resourceGroup and name"},
		{"bad fault domains", "availabilitySets: [{resourceGroup: rg, name: a, faultDomains: 4}]", "faultDomains"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo, err := Parse([]byte(base + tc.extra))
			if err == nil {
				_, err = topo.Normalize()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestProviderID(t *testing.T) {
	for in, want := range map[string]string{
		"/subscriptions/s/resourceGroups/RG-Cluster/providers/Microsoft.Compute/virtualMachines/vm0":                     "azure:///subscriptions/s/resourceGroups/rg-cluster/providers/Microsoft.Compute/virtualMachines/vm0",
		"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/Pool1/virtualMachines/3": "azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/Pool1/virtualMachines/3",
	} {
		if got := ProviderID(in); got != want {
			t.Errorf("ProviderID(%s) = %s", in, got)
		}
	}
}

func TestMachineMapping(t *testing.T) {
	vmJSON := `{"id":"/subscriptions/s/resourceGroups/RG/providers/Microsoft.Compute/virtualMachineScaleSets/pool1/virtualMachines/2",
	 "name":"pool1_2","instanceId":"2","location":"EastUS","zones":["3"],"sku":{"name":"Standard_D2s_v3"},
	 "properties":{"osProfile":{"computerName":"Pool1-VMSS000002"},
	  "instanceView":{"platformFaultDomain":1,"statuses":[{"code":"ProvisioningState/succeeded"},{"code":"PowerState/running"}]}}}`
	var vm armcompute.VirtualMachineScaleSetVM
	if err := json.Unmarshal([]byte(vmJSON), &vm); err != nil {
		t.Fatal(err)
	}
	m := uniformMachine(&vm)
	want := Machine{NodeName: "pool1-vmss000002", ProviderID: "azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/pool1/virtualMachines/2",
		ResourceID: *vm.ID, Name: "pool1_2", ResourceGroup: "RG", ScaleSet: "pool1", InstanceID: "2", VMSize: "Standard_D2s_v3",
		Zone: "3", Region: "eastus", FaultDomain: 1, PowerState: "running"}
	gotJ, _ := json.Marshal(m)
	wantJ, _ := json.Marshal(want)
	if string(gotJ) != string(wantJ) {
		t.Errorf("machine:\n got %s\nwant %s", gotJ, wantJ)
	}

	nics := []json.RawMessage{
		json.RawMessage(`{"properties":{"primary":false,"ipConfigurations":[{"properties":{"primary":true,"privateIPAddress":"10.9.9.9"}}]}}`),
		json.RawMessage(`{"properties":{"primary":true,"ipConfigurations":[
			{"properties":{"primary":false,"privateIPAddress":"fd00::5"}},
			{"properties":{"primary":false,"privateIPAddress":"10.0.0.6"}},
			{"properties":{"primary":true,"privateIPAddress":"10.0.0.5"}}]}}`),
	}
	ips, err := primaryIPs(nics)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(ips, ",") != "10.0.0.5,10.0.0.6,fd00::5" {
		t.Errorf("ips = %v", ips)
	}
}
