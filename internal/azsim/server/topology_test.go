package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/imds"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
)

const fullTopology = `
location: eastus
resourceGroups: [rg-cluster, rg-other]
virtualNetworks:
- resourceGroup: rg-cluster
  name: vnet
  addressPrefixes: [10.0.0.0/8, "fd00::/48"]
  subnets:
  - {name: subnet, addressPrefix: 10.240.0.0/16, addressPrefixV6: "fd00:0:0:1::/64", networkSecurityGroup: nsg, routeTable: rt}
networkSecurityGroups: [{resourceGroup: rg-cluster, name: nsg}]
routeTables: [{resourceGroup: rg-cluster, name: rt}]
scaleSets:
- {resourceGroup: rg-cluster, name: pool1, capacity: 3, zones: ["1","2","3"], computerNamePrefix: pool1-vmss, subFaultDomain: "1",
   tags: {Platform_Interconnect_Group: ig-1}}
availabilitySets:
- {resourceGroup: rg-cluster, name: as1, faultDomains: 2, vms: 2, vmNamePrefix: as1-vm-}
virtualMachines:
- {resourceGroup: rg-other, name: Other-VM-0, zone: "2", subnet: {resourceGroup: rg-cluster, vnet: vnet, name: subnet}}
`

func TestSeedTopologyAndIMDS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topo, err := topology.Parse([]byte(fullTopology))
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, Options{LRODuration: time.Second})
	res, err := s.Client().Seed(ctx, topo)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Machines) != 6 {
		t.Fatalf("machines = %+v", res.Machines)
	}
	byName := map[string]topology.Machine{}
	for _, m := range res.Machines {
		byName[m.NodeName] = m
		if m.Region != "eastus" || m.VMSize != topology.DefaultVMSize || len(m.InternalIPs) == 0 || !strings.HasPrefix(m.InternalIPs[0], "10.240.") {
			t.Errorf("machine %s: %+v", m.NodeName, m)
		}
	}
	base := "azure:///subscriptions/" + sub + "/resourceGroups/"
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("pool1-vmss%06d", i)
		m, ok := byName[name]
		if !ok {
			t.Fatalf("no machine %s in %v", name, res.Machines)
		}
		want := fmt.Sprintf("%srg-cluster/providers/Microsoft.Compute/virtualMachineScaleSets/pool1/virtualMachines/%d", base, i)
		if m.ProviderID != want || m.ScaleSet != "pool1" || m.InstanceID != fmt.Sprint(i) || m.Zone == "" ||
			len(m.InternalIPs) != 1 {
			t.Errorf("%s: %+v", name, m)
		}
	}
	zones := map[string]bool{}
	for i := 0; i < 3; i++ {
		zones[byName[fmt.Sprintf("pool1-vmss%06d", i)].Zone] = true
	}
	if len(zones) != 3 {
		t.Errorf("instances not spread over 3 zones: %v", zones)
	}
	fds := map[int]bool{}
	for _, n := range []string{"as1-vm-0", "as1-vm-1"} {
		m := byName[n]
		if m.ProviderID != base+"rg-cluster/providers/Microsoft.Compute/virtualMachines/"+n || m.AvailabilitySet == "" || m.Zone != "" || m.ScaleSet != "" {
			t.Errorf("%s: %+v", n, m)
		}
		fds[m.FaultDomain] = true
	}
	if len(fds) != 2 {
		t.Errorf("availability set VMs share a fault domain: %v", fds)
	}
	if m := byName["other-vm-0"]; m.ProviderID != base+"rg-other/providers/Microsoft.Compute/virtualMachines/Other-VM-0" || m.Zone != "2" || m.ResourceGroup != "rg-other" {
		t.Errorf("other-vm-0: %+v", m)
	}

	// Seeded compute resources carry what real ARM returns for an OS disk from an image:
	// osType (clients dereference it) and the image reference.
	ssID := "/subscriptions/" + sub + "/resourceGroups/rg-cluster/providers/Microsoft.Compute/virtualMachineScaleSets/pool1"
	ids := []string{ssID}
	for _, m := range res.Machines {
		ids = append(ids, strings.TrimPrefix(m.ProviderID, "azure://"))
	}
	for _, id := range ids {
		doc, err := s.Client().Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		sp := arm.Obj(doc, false, "properties", "storageProfile")
		if id == ssID {
			sp = arm.Obj(doc, false, "properties", "virtualMachineProfile", "storageProfile")
		}
		if arm.Str(sp, "osDisk", "osType") != "Linux" || arm.Str(sp, "imageReference", "publisher") == "" {
			t.Errorf("%s: storageProfile without osType or imageReference: %v", id, sp)
		}
		if id != ssID && arm.Str(sp, "osDisk", "name") == "" {
			t.Errorf("%s: OS disk without a name: %v", id, sp)
		}
	}

	// IMDS answers for each machine as the CCM reads it.
	for _, m := range res.Machines {
		req, _ := http.NewRequest(http.MethodGet, s.IMDSURL()+"/metadata/instance?format=json&api-version=2021-10-01", nil)
		req.Header.Set("Metadata", "True")
		req.Header.Set("X-Azsim-Vm", m.NodeName)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var doc imds.Document
		_ = json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		c := doc.Compute
		if resp.StatusCode != 200 || !strings.EqualFold(c.OSProfile.ComputerName, m.NodeName) || c.Zone != m.Zone ||
			c.PlatformFaultDomain != fmt.Sprint(m.FaultDomain) || c.VMScaleSetName != m.ScaleSet || c.VMSize != m.VMSize ||
			!strings.EqualFold(c.ResourceGroupName, m.ResourceGroup) || c.SubscriptionID != sub || !strings.EqualFold("azure://"+c.ResourceID, m.ProviderID) {
			t.Errorf("IMDS for %s: %d %+v", m.NodeName, resp.StatusCode, c)
			continue
		}
		// The scale set's sub fault domain and interconnect group tag reach its instances only.
		wantSFD, wantTags := "", 0
		if m.ScaleSet == "pool1" {
			wantSFD, wantTags = "1", 1
		}
		if c.PlatformSubFaultDomain != wantSFD || len(c.TagsList) != wantTags ||
			(wantTags == 1 && c.TagsList[0] != (imds.Tag{Name: "Platform_Interconnect_Group", Value: "ig-1"})) {
			t.Errorf("IMDS placement for %s: platformSubFaultDomain %q, tagsList %+v", m.NodeName, c.PlatformSubFaultDomain, c.TagsList)
		}
		if len(doc.Network.Interface) == 0 || doc.Network.Interface[0].IPv4.IPAddress[0].PrivateIPAddress != m.InternalIPs[0] {
			t.Errorf("IMDS network for %s: %+v", m.NodeName, doc.Network)
		}
	}

	// VM actions through the control API.
	vmID := strings.TrimPrefix(byName["as1-vm-1"].ProviderID, "azure://")
	if err := s.Client().VMAction(ctx, vmID, "deallocate"); err != nil {
		t.Fatal(err)
	}
	res2, err := topology.Collect(ctx, s.Engine(), mustNormalize(t, topo), topology.SeedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range res2.Machines {
		if m.NodeName == "as1-vm-1" && m.PowerState != "deallocated" {
			t.Errorf("after deallocate: %+v", m)
		}
	}
	if err := s.Client().VMAction(ctx, vmID, "delete"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client().Get(ctx, vmID); err == nil {
		t.Error("deleted VM still readable")
	}
}

func mustNormalize(t *testing.T, topo *topology.Topology) *topology.Topology {
	t.Helper()
	c := *topo
	c.SubscriptionID = sub
	n, err := c.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestGenericResourceList(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topo, err := topology.Parse([]byte(fullTopology))
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, Options{IMDSAddr: "off"})
	if _, err := s.Seed(ctx, topo); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want []string
	}{
		{"/subscriptions/" + sub + "/resourceGroups/rg-other/resources", []string{"Other-VM-0", "Other-VM-0-nic"}},
		{"/subscriptions/" + sub + "/resources?$filter=resourceGroup%20eq%20'rg-other'", []string{"Other-VM-0", "Other-VM-0-nic"}},
	} {
		rec := httptest.NewRecorder()
		req, _ := http.NewRequest(http.MethodGet, "https://azsim"+tc.path+"&api-version=2021-04-01", nil)
		if !strings.Contains(tc.path, "?") {
			req, _ = http.NewRequest(http.MethodGet, "https://azsim"+tc.path+"?api-version=2021-04-01", nil)
		}
		s.Engine().ServeHTTP(rec, req)
		var page struct {
			Value []struct{ Name, Type string }
		}
		_ = json.Unmarshal(rec.Body.Bytes(), &page)
		var names []string
		for _, v := range page.Value {
			names = append(names, v.Name)
		}
		if strings.Join(names, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: %d %v, want %v", tc.path, rec.Code, names, tc.want)
		}
	}
}
