package imds

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const (
	sub  = "/subscriptions/s1/resourceGroups/RG-Cluster/providers"
	vmID = sub + "/Microsoft.Compute/virtualMachines/as1-vm-0"
	ssID = sub + "/Microsoft.Compute/virtualMachineScaleSets/pool1"
)

// fakeStore answers like the engine for a few fixed documents.
type fakeStore struct{ docs map[string]string }

func (f fakeStore) ListResources(t string) [][]byte {
	var out [][]byte
	for k, v := range f.docs {
		if strings.HasPrefix(k, "list:"+t) {
			out = append(out, []byte(v))
		}
	}
	return out
}

func (f fakeStore) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Path
	if r.URL.Query().Get("$expand") != "" {
		key += "?expand"
	}
	doc, ok := f.docs[key]
	if !ok {
		http.Error(w, `{"error":{"code":"NotFound"}}`, 404)
		return
	}
	_, _ = w.Write([]byte(doc))
}

func newStore() fakeStore {
	subnet := sub + "/Microsoft.Network/virtualNetworks/vnet/subnets/subnet"
	return fakeStore{docs: map[string]string{
		"list:Microsoft.Compute/virtualMachines": `{"id":"` + vmID + `","name":"as1-vm-0","properties":{"osProfile":{"computerName":"AS1-VM-0"}}}`,
		vmID + "?expand": `{"id":"` + vmID + `","name":"as1-vm-0","location":"eastus","tags":{"b":"2","a":"1"},
		  "properties":{"vmId":"guid-1","hardwareProfile":{"vmSize":"Standard_D4s_v3"},"osProfile":{"computerName":"AS1-VM-0","adminUsername":"azureuser"},
		  "networkProfile":{"networkInterfaces":[{"id":"` + sub + `/Microsoft.Network/networkInterfaces/nic2"},{"id":"` + sub + `/Microsoft.Network/networkInterfaces/nic1","properties":{"primary":true}}]},
		  "instanceView":{"platformFaultDomain":2,"platformUpdateDomain":4}}}`,
		sub + "/Microsoft.Network/networkInterfaces/nic1": `{"id":"nic1","properties":{"macAddress":"00-0D-3A-11-22-33","ipConfigurations":[
		  {"properties":{"privateIPAddress":"fd00::4","subnet":{"id":"` + subnet + `"}}},
		  {"properties":{"primary":true,"privateIPAddress":"10.240.0.4","subnet":{"id":"` + subnet + `"},"publicIPAddress":{"id":"` + sub + `/Microsoft.Network/publicIPAddresses/pip"}}}]}}`,
		sub + "/Microsoft.Network/networkInterfaces/nic2": `{"id":"nic2","properties":{"ipConfigurations":[{"properties":{"primary":true,"privateIPAddress":"10.240.0.9"}}]}}`,
		sub + "/Microsoft.Network/publicIPAddresses/pip":  `{"properties":{"ipAddress":"203.0.113.7"}}`,
		subnet: `{"properties":{"addressPrefixes":["10.240.0.0/16","fd00:0:0:1::/64"]}}`,
		"list:Microsoft.Compute/virtualMachineScaleSets": `{"id":"` + ssID + `","name":"pool1"}`,
		ssID + "/virtualMachines?expand": `{"value":[{"id":"` + ssID + `/virtualMachines/3","name":"pool1_3","instanceId":"3","location":"eastus","zones":["2"],
		  "sku":{"name":"Standard_D2s_v3"},"properties":{"osProfile":{"computerName":"pool1-vmss000003"},"instanceView":{"platformFaultDomain":1}}}]}`,
		ssID + "/virtualMachines/3/networkInterfaces": `{"value":[{"id":"x","properties":{"primary":true,"ipConfigurations":[{"properties":{"primary":true,"privateIPAddress":"10.240.0.10"}}]}}]}`,
	}}
}

func get(t *testing.T, s http.Handler, path string, hdr map[string]string) (int, string) {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	req.Header.Set("Metadata", "true")
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

func TestInstanceDocumentForVM(t *testing.T) {
	s := New(newStore())
	s.SetDefaultVM("as1-vm-0")
	code, body := get(t, s, "/metadata/instance?api-version=2021-10-01&format=json", nil)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var doc Document
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	c := doc.Compute
	if c.Name != "as1-vm-0" || c.ResourceGroupName != "RG-Cluster" || c.SubscriptionID != "s1" || c.VMSize != "Standard_D4s_v3" ||
		c.PlatformFaultDomain != "2" || c.PlatformUpdateDomain != "4" || c.Zone != "" || c.Location != "eastus" ||
		c.OSProfile.ComputerName != "AS1-VM-0" || c.ResourceID != vmID || c.Tags != "a:1;b:2" || c.VMScaleSetName != "" {
		t.Errorf("compute = %+v", c)
	}
	if len(doc.Network.Interface) != 2 {
		t.Fatalf("interfaces = %+v", doc.Network.Interface)
	}
	nic := doc.Network.Interface[0]
	if nic.MacAddress != "000D3A112233" || len(nic.IPv4.IPAddress) != 1 || nic.IPv4.IPAddress[0] != (IPAddress{"10.240.0.4", "203.0.113.7"}) ||
		len(nic.IPv6.IPAddress) != 1 || nic.IPv6.IPAddress[0].PrivateIPAddress != "fd00::4" ||
		len(nic.IPv4.Subnet) != 1 || nic.IPv4.Subnet[0] != (SubnetRef{"10.240.0.0", "16"}) {
		t.Errorf("primary nic = %+v", nic)
	}
	if doc.Network.Interface[1].IPv4.IPAddress[0].PrivateIPAddress != "10.240.0.9" {
		t.Errorf("second nic = %+v", doc.Network.Interface[1])
	}
}

func TestInstanceSelectionAndPaths(t *testing.T) {
	s := New(newStore())
	for _, tc := range []struct {
		name, path string
		hdr        map[string]string
		code       int
		want       string
	}{
		{"no metadata header", "/metadata/instance?api-version=2021-10-01", map[string]string{"Metadata": ""}, 400, "metadata header"},
		{"forwarded", "/metadata/instance?api-version=2021-10-01", map[string]string{"X-Forwarded-For": "1.2.3.4"}, 400, "X-Forwarded-For"},
		{"no api-version", "/metadata/instance", nil, 400, "newest-versions"},
		{"no vm selected", "/metadata/instance?api-version=2021-10-01", nil, 404, "no VM selected"},
		{"unknown vm", "/metadata/instance?api-version=2021-10-01&azsim-vm=nope", nil, 404, "no VM"},
		{"vmss by computer name header", "/metadata/instance/compute/zone?api-version=2021-10-01&format=text", map[string]string{"X-Azsim-Vm": "POOL1-VMSS000003"}, 200, "2"},
		{"vmss by ss_id", "/metadata/instance/compute/vmScaleSetName?api-version=2021-10-01&format=text&azsim-vm=pool1_3", nil, 200, "pool1"},
		{"vmss fault domain", "/metadata/instance/compute/platformFaultDomain?api-version=2021-10-01&format=text&azsim-vm=pool1_3", nil, 200, "1"},
		{"vmss ip", "/metadata/instance/network/interface/0/ipv4/ipAddress/0/privateIpAddress?api-version=2021-10-01&format=text&azsim-vm=pool1_3", nil, 200, "10.240.0.10"},
		{"leaf needs text", "/metadata/instance/compute/zone?api-version=2021-10-01&azsim-vm=pool1_3", nil, 400, "text format"},
		{"compute json", "/metadata/instance/compute?api-version=2021-10-01&format=json&azsim-vm=as1-vm-0", nil, 200, `"vmSize":"Standard_D4s_v3"`},
		{"bad path", "/metadata/instance/compute/nothing?api-version=2021-10-01&format=text&azsim-vm=as1-vm-0", nil, 404, "Not found"},
		{"loadbalancer", "/metadata/loadbalancer?api-version=2020-10-01&format=json", nil, 200, "publicIpAddresses"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, s, tc.path, tc.hdr)
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Errorf("got %d %s, want %d containing %q", code, body, tc.code, tc.want)
			}
		})
	}
}

func TestSubFaultDomainAndInterconnectTag(t *testing.T) {
	s := New(newStore())
	s.SetSubFaultDomain(strings.ToUpper(ssID+"/virtualMachines/3"), "2")
	doc := func(vm string) (Document, string) {
		t.Helper()
		s.SetDefaultVM(vm)
		code, body := get(t, s, "/metadata/instance?api-version=2021-10-01&format=json", nil)
		if code != 200 {
			t.Fatalf("%d %s", code, body)
		}
		var d Document
		if err := json.Unmarshal([]byte(body), &d); err != nil {
			t.Fatal(err)
		}
		return d, body
	}
	if d, _ := doc("pool1_3"); d.Compute.PlatformSubFaultDomain != "2" {
		t.Errorf("scale set instance: platformSubFaultDomain %q, want 2", d.Compute.PlatformSubFaultDomain)
	}
	// A VM given none has no such field, as in Azure.
	if _, body := doc("as1-vm-0"); strings.Contains(body, "platformSubFaultDomain") {
		t.Errorf("VM without a sub fault domain: %s", body)
	}
	s.SetSubFaultDomain(ssID+"/virtualMachines/3", "")
	if d, _ := doc("pool1_3"); d.Compute.PlatformSubFaultDomain != "" {
		t.Errorf("removed sub fault domain still served: %q", d.Compute.PlatformSubFaultDomain)
	}
}
