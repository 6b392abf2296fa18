package topology

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/compute"
	"github.com/azure-ccm/azure-ccm/internal/azsim/network"
)

// basicCluster is what the Basic mode of the existing provider leaves: Basic load balancers per
// VM set with NIC-based pools, a Basic public IP, an internal frontend with a fixed address.
const basicCluster = `
resourceGroups: [rg]
virtualNetworks:
- {resourceGroup: rg, name: vnet, addressPrefixes: [10.0.0.0/8], subnets: [{name: nodes, addressPrefix: 10.240.0.0/16}]}
publicIPs:
- {resourceGroup: rg, name: pip-a, sku: basic, allocation: dynamic}
loadBalancers:
- resourceGroup: rg
  name: kubernetes
  sku: basic
  frontends: [{name: fe-a, publicIP: pip-a}]
  backendPools: [kubernetes]
  rules: [{name: fe-a-TCP-80, frontend: fe-a, backendPool: kubernetes, port: 80}]
- resourceGroup: rg
  name: kubernetes-internal
  sku: Basic
  frontends: [{name: fe-b, privateIP: 10.240.0.200}]
  backendPools: [kubernetes]
- {resourceGroup: rg, name: pool1, sku: Basic, backendPools: [kubernetes]}
availabilitySets:
- resourceGroup: rg
  name: as
  vms: 2
  loadBalancerPools: [{loadBalancer: kubernetes, pool: kubernetes}, {loadBalancer: kubernetes-internal, pool: kubernetes}]
scaleSets:
- {resourceGroup: rg, name: pool1, capacity: 2, loadBalancerPools: [{loadBalancer: pool1, pool: kubernetes}]}
`

func TestSeedBasicLoadBalancers(t *testing.T) {
	e := arm.NewEngine(arm.Config{LRODuration: 10 * time.Millisecond})
	network.Register(e)
	compute.Register(e)
	topo, err := Parse([]byte(basicCluster))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := Seed(ctx, e, topo, SeedOptions{}); err != nil {
		t.Fatal(err)
	}
	rg := "/subscriptions/" + DefaultSubscriptionID + "/resourceGroups/rg/providers/"
	get := func(id string) map[string]any {
		t.Helper()
		b, ok := e.GetResource(id)
		if !ok {
			t.Fatalf("%s not created", id)
		}
		var doc map[string]any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		return doc
	}
	members := func(lb string) string {
		doc := get(rg + "Microsoft.Network/loadBalancers/" + lb)
		if sku := arm.Str(doc, "sku", "name"); sku != "Basic" {
			t.Errorf("%s sku %s", lb, sku)
		}
		pool := arm.Arr(arm.Props(doc), "backendAddressPools")[0]
		return strings.ToLower(strings.Join(arm.RefIDs(arm.Props(pool), "backendIPConfigurations"), " "))
	}
	if m := members("kubernetes"); strings.Count(m, "/networkinterfaces/as-vm-") != 2 {
		t.Errorf("availability set VMs not in the public pool: %s", m)
	}
	if m := members("kubernetes-internal"); strings.Count(m, "/networkinterfaces/as-vm-") != 2 {
		t.Errorf("availability set VMs not in the internal pool: %s", m)
	}
	if m := members("pool1"); strings.Count(m, "/virtualmachinescalesets/pool1/virtualmachines/") != 2 {
		t.Errorf("scale set instances not in pool1: %s", m)
	}
	pip := get(rg + "Microsoft.Network/publicIPAddresses/pip-a")
	if arm.Str(pip, "sku", "name") != "Basic" || arm.Str(pip, "properties", "ipAddress") == "" ||
		!strings.HasSuffix(arm.Str(pip, "properties", "ipConfiguration", "id"), "/frontendIPConfigurations/fe-a") {
		t.Errorf("public IP %v", pip)
	}
	fe := arm.Arr(arm.Props(get(rg+"Microsoft.Network/loadBalancers/kubernetes-internal")), "frontendIPConfigurations")[0]
	if ip := arm.Str(arm.Props(fe), "privateIPAddress"); ip != "10.240.0.200" {
		t.Errorf("internal frontend address %s", ip)
	}
}

func TestNormalizeLoadBalancerErrors(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"unknown pip", `
virtualNetworks: [{resourceGroup: rg, name: v, addressPrefixes: [10.0.0.0/8], subnets: [{name: s, addressPrefix: 10.1.0.0/16}]}]
loadBalancers: [{resourceGroup: rg, name: lb, frontends: [{name: f, publicIP: nope}]}]`, "names publicIP nope"},
		{"bad sku", `loadBalancers: [{resourceGroup: rg, name: lb, sku: Gold}]`, "sku must be one of"},
		{"unknown pool", `
virtualNetworks: [{resourceGroup: rg, name: v, addressPrefixes: [10.0.0.0/8], subnets: [{name: s, addressPrefix: 10.1.0.0/16}]}]
virtualMachines: [{resourceGroup: rg, name: vm, loadBalancerPools: [{loadBalancer: lb, pool: p}]}]`, "loadBalancerPools names rg/lb/p"},
		{"rule without frontend", `loadBalancers: [{resourceGroup: rg, name: lb, backendPools: [p], rules: [{name: r, frontend: f, backendPool: p, port: 80}]}]`, "needs an existing frontend"},
	} {
		t.Run(c.name, func(t *testing.T) {
			topo, err := Parse([]byte(c.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := topo.Normalize(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}
