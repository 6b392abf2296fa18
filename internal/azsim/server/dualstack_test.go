package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/azure-ccm/azure-ccm/internal/azsim/imds"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
)

const dualStackTopology = `
location: eastus
virtualNetworks:
- resourceGroup: rg-ds
  name: vnet
  addressPrefixes: [10.0.0.0/8, "fd00::/48"]
  subnets:
  - {name: subnet, addressPrefix: 10.240.0.0/16, addressPrefixV6: "fd00:0:0:1::/64"}
scaleSets:
- {resourceGroup: rg-ds, name: uni, capacity: 2, ipv6: true}
- {resourceGroup: rg-ds, name: flex, orchestration: Flexible, capacity: 1, ipv6: true}
availabilitySets:
- {resourceGroup: rg-ds, name: as1, vms: 1, vmNamePrefix: as1-vm-, ipv6: true}
virtualMachines:
- {resourceGroup: rg-ds, name: single, ipv6: true}
`

// Every kind of dual-stack machine gets an IPv4 and an IPv6 address from the
// subnet's two prefixes, and IMDS shows the IPv6 one under ipv6.ipAddress.
func TestDualStackMachines(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topo, err := topology.Parse([]byte(dualStackTopology))
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, Options{})
	res, err := s.Seed(ctx, topo)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Machines) != 5 {
		t.Fatalf("machines %+v", res.Machines)
	}
	v4, v6 := netip.MustParsePrefix("10.240.0.0/16"), netip.MustParsePrefix("fd00:0:0:1::/64")
	seen := map[string]bool{}
	for _, m := range res.Machines {
		if len(m.InternalIPs) != 2 {
			t.Errorf("%s: internal IPs %v", m.NodeName, m.InternalIPs)
			continue
		}
		a4, err4 := netip.ParseAddr(m.InternalIPs[0])
		a6, err6 := netip.ParseAddr(m.InternalIPs[1])
		if err4 != nil || err6 != nil || !v4.Contains(a4) || !v6.Contains(a6) || seen[m.InternalIPs[1]] {
			t.Errorf("%s: internal IPs %v (want IPv4 then a unique IPv6)", m.NodeName, m.InternalIPs)
		}
		seen[m.InternalIPs[1]] = true

		req, _ := http.NewRequest(http.MethodGet, s.IMDSURL()+"/metadata/instance?format=json&api-version=2021-10-01", nil)
		req.Header.Set("Metadata", "True")
		req.Header.Set("X-Azsim-Vm", m.NodeName)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var doc imds.Document
		err = json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if err != nil || len(doc.Network.Interface) == 0 {
			t.Errorf("IMDS %s: %v %+v", m.NodeName, err, doc.Network)
			continue
		}
		it := doc.Network.Interface[0]
		if len(it.IPv4.IPAddress) != 1 || it.IPv4.IPAddress[0].PrivateIPAddress != m.InternalIPs[0] ||
			len(it.IPv6.IPAddress) != 1 || it.IPv6.IPAddress[0].PrivateIPAddress != m.InternalIPs[1] {
			t.Errorf("IMDS %s network: %+v", m.NodeName, it)
		}
	}
}
