package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/control"
	"github.com/azure-ccm/azure-ccm/internal/azsim/server"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/nodes"
	"github.com/azure-ccm/azure-ccm/internal/testutil"
)

func testTopology(uniformCapacity int) *topology.Topology {
	return &topology.Topology{
		Location:       "eastus",
		ResourceGroups: []string{"rg", "rg-other"},
		VirtualNetworks: []topology.VirtualNetwork{{ResourceGroup: "rg", Name: "vnet", AddressPrefixes: []string{"10.0.0.0/8", "fd00::/48"},
			Subnets: []topology.Subnet{{Name: "nodes", AddressPrefix: "10.240.0.0/16", AddressPrefixV6: "fd00:0:0:1::/64"}}}},
		RouteTables: []topology.Named{{ResourceGroup: "rg", Name: "rt"}},
		ScaleSets: []topology.ScaleSet{
			{ResourceGroup: "rg", Name: "pool", Capacity: uniformCapacity, Zones: []string{"1", "2", "3"}, VMSize: "Standard_D4s_v3"},
			{ResourceGroup: "rg", Name: "flex", Orchestration: "Flexible", Capacity: 2, FaultDomains: 2},
		},
		AvailabilitySets: []topology.AvailabilitySet{{ResourceGroup: "rg", Name: "as", VMs: 2, IPv6: true}},
		VirtualMachines:  []topology.VirtualMachine{{ResourceGroup: "rg-other", Name: "other-vm", Zone: "2"}},
	}
}

type simEnv struct {
	sim   *server.Server
	cloud *Cloud
	res   *topology.Result
}

func startSim(t *testing.T, topo *topology.Topology, cfgExtra string) *simEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sim, err := server.Start(context.Background(), server.Options{IMDSAddr: "off"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	res, err := sim.Seed(ctx, topo)
	if err != nil {
		t.Fatal(err)
	}
	cfgJSON := fmt.Sprintf(`{"cloud":"AzureStackCloud","disableAzureStackCloud":true,"tenantId":%q,"subscriptionId":%q,
		"aadClientId":%q,"aadClientSecret":%q,"resourceGroup":"rg","location":"eastus","vnetName":"vnet","subnetName":"nodes",
		"routeTableName":"rt","vmType":"vmss"%s}`,
		server.DefaultTenantID, res.SubscriptionID, server.DefaultClientID, server.DefaultClientSecret, cfgExtra)
	cfg, err := config.Parse([]byte(cfgJSON), nil)
	if err != nil {
		t.Fatal(err)
	}
	env, err := config.ResolveEnvironment(ctx, cfg, sim.LookupEnvironmentFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	cloud, err := New(ctx, cfg, Options{
		ARM:               arm.Options{Transport: sim.HTTPClient(), Environment: &env, Metrics: arm.NewMetrics(), PollFrequency: 100 * time.Millisecond},
		RouteGatherWindow: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &simEnv{sim: sim, cloud: cloud, res: res}
}

// armCalls sums azsim's request counters whose method and resource type match.
func (e *simEnv) armCalls(method, typeContains string) int64 {
	var n int64
	for _, c := range e.sim.Middleware().Stats().Requests {
		if (method == "" || strings.EqualFold(c.Method, method)) && strings.Contains(strings.ToLower(c.ResourceType), strings.ToLower(typeContains)) {
			n += c.Count
		}
	}
	return n
}

func (e *simEnv) statsString() string {
	var b strings.Builder
	for _, c := range e.sim.Middleware().Stats().Requests {
		fmt.Fprintf(&b, "%s %s %d: %d\n", c.Method, c.ResourceType, c.Status, c.Count)
	}
	return b.String()
}

func nodeFor(m topology.Machine, labels map[string]string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: m.NodeName, Labels: labels}}
}

func TestInstancesV2AgainstAzsim(t *testing.T) {
	e := startSim(t, testTopology(3), `,"vmCacheTTLInSeconds":1,"vmssVirtualMachinesCacheTTLInSeconds":1`)
	inst, _ := e.cloud.InstancesV2()
	ctx := context.Background()
	if got := e.cloud.RegionZones(); strings.Join(got, ",") != "1,2,3" {
		t.Errorf("region zones = %v", got)
	}
	if len(e.res.Machines) != 3+2+2+1 {
		t.Fatalf("seeded %d machines", len(e.res.Machines))
	}
	kinds := map[string]int{}
	for _, m := range e.res.Machines {
		var labels map[string]string
		if m.ResourceGroup != "rg" {
			labels = map[string]string{nodes.LabelResourceGroup: m.ResourceGroup}
		}
		n := nodeFor(m, labels)
		md, err := inst.InstanceMetadata(ctx, n)
		if err != nil {
			t.Fatalf("%s: %v", m.NodeName, err)
		}
		if !strings.EqualFold(md.ProviderID, m.ProviderID) {
			t.Errorf("%s: providerID %s want %s", m.NodeName, md.ProviderID, m.ProviderID)
		}
		if md.InstanceType != m.VMSize {
			t.Errorf("%s: instance type %s want %s", m.NodeName, md.InstanceType, m.VMSize)
		}
		wantZone := fmt.Sprint(m.FaultDomain)
		if m.Zone != "" {
			wantZone = "eastus-" + m.Zone
		}
		if md.Zone != wantZone || md.Region != "eastus" {
			t.Errorf("%s: zone %q region %q, want %q eastus", m.NodeName, md.Zone, md.Region, wantZone)
		}
		var internal []string
		hostname := ""
		for _, a := range md.NodeAddresses {
			switch a.Type {
			case v1.NodeInternalIP:
				internal = append(internal, a.Address)
			case v1.NodeHostName:
				hostname = a.Address
			}
		}
		if strings.Join(internal, ",") != strings.Join(m.InternalIPs, ",") || hostname != m.NodeName {
			t.Errorf("%s: addresses %v want internal %v", m.NodeName, md.NodeAddresses, m.InternalIPs)
		}
		// Once the providerID is set, it is used instead of the name.
		n.Spec.ProviderID = md.ProviderID
		if ok, err := inst.InstanceExists(ctx, n); err != nil || !ok {
			t.Errorf("%s: exists=%v err=%v", m.NodeName, ok, err)
		}
		if down, err := inst.InstanceShutdown(ctx, n); err != nil || down {
			t.Errorf("%s: shutdown=%v err=%v", m.NodeName, down, err)
		}
		vmset, err := e.cloud.Resolver.VMSetOf(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		kinds[string(vmset.Kind)]++
	}
	want := map[string]int{"vmss-uniform": 3, "vmss-flex": 2, "availabilitySet": 2, "standalone": 1}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Errorf("vm set kinds %v want %v", kinds, want)
	}

	// On-prem node: exists, never shut down, providerID azure://<name>, no ARM call.
	before := e.armCalls("", "")
	onprem := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "onprem-1", Labels: map[string]string{nodes.LabelManaged: "false"}}}
	md, err := inst.InstanceMetadata(ctx, onprem)
	if err != nil || md.ProviderID != "azure://onprem-1" {
		t.Fatalf("on-prem metadata %+v %v", md, err)
	}
	if ok, _ := inst.InstanceExists(ctx, onprem); !ok {
		t.Error("on-prem node must exist")
	}
	if down, _ := inst.InstanceShutdown(ctx, onprem); down {
		t.Error("on-prem node must not be shut down")
	}
	if after := e.armCalls("", ""); after != before {
		t.Errorf("on-prem node caused %d ARM calls", after-before)
	}

	// Deallocate one VM of each kind, delete another: shutdown and existence follow.
	byKind := map[string]topology.Machine{}
	for _, m := range e.res.Machines {
		k := m.ScaleSet + "|" + m.AvailabilitySet
		if _, ok := byKind[k]; !ok {
			byKind[k] = m
		}
	}
	for _, m := range byKind {
		if err := e.sim.VMAction(ctx, control.VMAction{ID: m.ResourceID, Action: "deallocate"}); err != nil {
			t.Fatalf("deallocate %s: %v", m.ResourceID, err)
		}
	}
	for _, m := range byKind {
		n := nodeFor(m, nil)
		n.Spec.ProviderID = m.ProviderID
		testutil.WaitFor(t, "shutdown of "+m.NodeName, func() bool { down, err := inst.InstanceShutdown(ctx, n); return err == nil && down })
	}
	victim := e.res.Machines[len(e.res.Machines)-1]
	if err := e.sim.VMAction(ctx, control.VMAction{ID: victim.ResourceID, Action: "delete"}); err != nil {
		t.Fatal(err)
	}
	gone := nodeFor(victim, nil)
	gone.Spec.ProviderID = victim.ProviderID
	testutil.WaitFor(t, "deletion of "+victim.NodeName, func() bool { ok, err := inst.InstanceExists(ctx, gone); return err == nil && !ok })
	if _, err := inst.InstanceMetadata(ctx, gone); !errors.Is(err, cloudprovider.InstanceNotFound) {
		t.Errorf("metadata of deleted VM: %v", err)
	}
}

// Initialising many nodes of one scale set costs a constant number of LISTs, not one GET each.
func TestManyScaleSetNodesCostConstantARMCalls(t *testing.T) {
	const n = 200
	topo := testTopology(n)
	topo.ScaleSets = topo.ScaleSets[:1]
	topo.AvailabilitySets, topo.VirtualMachines = nil, nil
	e := startSim(t, topo, "")
	e.sim.Middleware().ResetStats()
	inst, _ := e.cloud.InstancesV2()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, m := range e.res.Machines {
		m := m
		wg.Add(1)
		go func() {
			defer wg.Done()
			md, err := inst.InstanceMetadata(context.Background(), nodeFor(m, nil))
			if err == nil && !strings.EqualFold(md.ProviderID, m.ProviderID) {
				err = fmt.Errorf("%s: got %s", m.NodeName, md.ProviderID)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	gets := e.armCalls("GET", "")
	t.Logf("ARM calls for %d nodes:\n%s", n, e.statsString())
	if gets > 6 {
		t.Fatalf("%d GET/LIST requests for %d nodes; want a constant handful", gets, n)
	}
}

func TestRoutesAgainstAzsim(t *testing.T) {
	e := startSim(t, testTopology(3), "")
	rp, ok := e.cloud.Routes()
	if !ok {
		t.Fatal("routes not enabled")
	}
	ctx := context.Background()
	e.sim.Middleware().ResetStats()
	var wg sync.WaitGroup
	var want []string
	for i, m := range e.res.Machines[:3] {
		m, i := m, i
		cidr := fmt.Sprintf("10.244.%d.0/24", i)
		want = append(want, m.NodeName+"____"+strings.NewReplacer(".", "", "/", "").Replace(cidr))
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := rp.CreateRoute(ctx, "kubernetes", "", &cloudprovider.Route{TargetNode: types.NodeName(m.NodeName), DestinationCIDR: cidr,
				TargetNodeAddresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: m.InternalIPs[0]}}})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	// An on-prem node's route is remembered, not written.
	e.cloud.Resolver.Nodes().Set(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "onprem-1", Labels: map[string]string{nodes.LabelManaged: "false"}}})
	if err := rp.CreateRoute(ctx, "kubernetes", "", &cloudprovider.Route{TargetNode: "onprem-1", DestinationCIDR: "10.244.99.0/24"}); err != nil {
		t.Fatal(err)
	}
	// A dual-stack route whose next hop comes from the VM's NIC (availability set VMs are IPv6).
	var v6node topology.Machine
	for _, m := range e.res.Machines {
		if m.AvailabilitySet != "" {
			v6node = m
		}
	}
	if err := rp.CreateRoute(ctx, "kubernetes", "", &cloudprovider.Route{TargetNode: types.NodeName(v6node.NodeName), DestinationCIDR: "fd10:244::/64"}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	puts := e.armCalls("PUT", "routeTables")
	if puts < 1 || puts > 3 {
		t.Errorf("%d route table PUTs for 4 routes", puts)
	}
	list, err := rp.ListRoutes(ctx, "kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*cloudprovider.Route{}
	for _, r := range list {
		got[r.Name] = r
	}
	for _, name := range want {
		if got[name] == nil {
			t.Errorf("route %s missing; have %v", name, keys(got))
		}
	}
	if got["onprem-1____1024499024"] == nil || got[v6node.NodeName+"____fd1024464"] == nil {
		t.Errorf("on-prem or IPv6 route missing: %v", keys(got))
	}
	table, err := e.sim.Client().Get(ctx, "/subscriptions/"+e.res.SubscriptionID+"/resourceGroups/rg/providers/Microsoft.Network/routeTables/rt")
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprint(table); strings.Contains(s, "10.244.99.0") || !strings.Contains(s, "fd10:244::/64") {
		t.Errorf("route table in azsim: %s", s)
	}
	// Delete one route: it disappears from azsim.
	r := got[want[0]]
	if err := rp.DeleteRoute(ctx, "kubernetes", r); err != nil {
		t.Fatal(err)
	}
	list, _ = rp.ListRoutes(ctx, "kubernetes")
	for _, r := range list {
		if r.Name == want[0] {
			t.Errorf("route %s not deleted", want[0])
		}
	}
	if err := rp.DeleteRoute(ctx, "kubernetes", got["onprem-1____1024499024"]); err != nil {
		t.Fatal(err)
	}
}

func keys(m map[string]*cloudprovider.Route) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
