package loadbalancer

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/middleware"
	"github.com/azure-ccm/azure-ccm/internal/azsim/server"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/membership"
	"github.com/azure-ccm/azure-ccm/internal/nodes"
	"github.com/azure-ccm/azure-ccm/internal/writers"
)

// ipcEnv is azsim with an availability set, a Uniform and a Flexible scale set, and the load
// balancer wired for nodeIPConfiguration pools the way the CCM wires it.
type ipcEnv struct {
	sim     *server.Server
	res     *topology.Result
	clients *arm.Clients
	lb      *LoadBalancer
}

func ipcTopology(ipv6 bool) *topology.Topology {
	return &topology.Topology{
		Location:       "eastus",
		ResourceGroups: []string{testRG},
		VirtualNetworks: []topology.VirtualNetwork{{ResourceGroup: testRG, Name: "vnet", AddressPrefixes: []string{"10.0.0.0/8", "fd00::/48"},
			Subnets: []topology.Subnet{{Name: "subnet", AddressPrefix: "10.240.0.0/16", AddressPrefixV6: "fd00:0:0:1::/64"}}}},
		NetworkSecurityGroups: []topology.Named{{ResourceGroup: testRG, Name: "nsg"}},
		ScaleSets: []topology.ScaleSet{
			{ResourceGroup: testRG, Name: "pool", Capacity: 3, Zones: []string{"1", "2", "3"}, IPv6: ipv6},
			{ResourceGroup: testRG, Name: "flex", Orchestration: "Flexible", Capacity: 2, FaultDomains: 2, IPv6: ipv6},
		},
		AvailabilitySets: []topology.AvailabilitySet{{ResourceGroup: testRG, Name: "as", VMs: 2, IPv6: ipv6}},
	}
}

func newIPCEnv(t *testing.T, topo *topology.Topology, cfgExtra string) *ipcEnv {
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
	cfg, err := config.Parse([]byte(fmt.Sprintf(`{"cloud":"AzureStackCloud","disableAzureStackCloud":true,"tenantId":%q,"subscriptionId":%q,
		"aadClientId":%q,"aadClientSecret":%q,"resourceGroup":%q,"location":"eastus","vnetName":"vnet","subnetName":"subnet",
		"securityGroupName":"nsg","loadBalancerSku":"standard","vmType":"vmss","enableVmssFlexNodes":true%s}`,
		server.DefaultTenantID, res.SubscriptionID, server.DefaultClientID, server.DefaultClientSecret, testRG, cfgExtra)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfgExtra == "" && cfg.LoadBalancerBackendPoolConfigurationType != config.BackendPoolNodeIPConfiguration {
		t.Fatalf("default pool type %q", cfg.LoadBalancerBackendPoolConfigurationType)
	}
	azEnv, err := config.ResolveEnvironment(ctx, cfg, sim.LookupEnvironmentFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	clients, err := arm.New(ctx, cfg, arm.Options{Transport: sim.HTTPClient(), Environment: &azEnv, Metrics: arm.NewMetrics(),
		PollFrequency: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	parts, err := Build(BuildOptions{Config: cfg, Zones: []string{"1", "2", "3"}, PublicIPs: clients.Caches.PublicIPs,
		PrivateLinks: clients.Caches.PrivateLinkServices,
		Writers: writers.New(writers.Options{Network: clients.Network, NodeNetwork: clients.NodeNetwork, Compute: clients.Compute,
			PollFrequency: 20 * time.Millisecond}),
		Nodes: nodes.NewResolver(cfg, clients.Caches, nil), Caches: clients.Caches})
	if err != nil {
		t.Fatal(err)
	}
	return &ipcEnv{sim: sim, res: res, clients: clients, lb: parts.LoadBalancer}
}

// machineNodes are the Nodes of every seeded machine, as the node controllers would have made
// them (provider ID and InternalIPs set).
func (e *ipcEnv) machineNodes() []*v1.Node {
	var out []*v1.Node
	for _, m := range e.res.Machines {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: m.NodeName, Labels: map[string]string{}}, Spec: v1.NodeSpec{ProviderID: m.ProviderID}}
		for _, ip := range m.InternalIPs {
			n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
		}
		out = append(out, n)
	}
	return out
}

func (e *ipcEnv) stats() map[string]int64 {
	out := map[string]int64{}
	for _, c := range e.sim.Middleware().Stats().Requests {
		out[strings.ToUpper(c.Method)+" "+strings.ToLower(c.ResourceType)] += c.Count
	}
	return out
}

func (e *ipcEnv) writes() int64 {
	st := e.sim.Middleware().Stats()
	return st.Writes("") + st.Deletes("")
}

func diff(a, b map[string]int64) string {
	var keys []string
	for k := range b {
		if b[k] != a[k] {
			keys = append(keys, fmt.Sprintf("%s: %d", k, b[k]-a[k]))
		}
	}
	sort.Strings(keys)
	return strings.Join(keys, "\n")
}

// ipConfigOwners maps every ip configuration ID (lower-case) of the resource group's NICs and
// Uniform instances' NICs to the VM's resource ID, read independently of the code under test.
func (e *ipcEnv) ipConfigOwners(t *testing.T, ctx context.Context) map[string]string {
	t.Helper()
	out := map[string]string{}
	nics := e.clients.NodeNetwork.NewInterfacesClient()
	add := func(n *armnetwork.Interface, vmID string) {
		for _, c := range n.Properties.IPConfigurations {
			out[strings.ToLower(*c.ID)] = strings.ToLower(vmID)
		}
	}
	for p := nics.NewListPager(testRG, nil); p.More(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range page.Value {
			if n.Properties.VirtualMachine != nil {
				add(n, *n.Properties.VirtualMachine.ID)
			}
		}
	}
	for p := nics.NewListVirtualMachineScaleSetNetworkInterfacesPager(testRG, "pool", nil); p.More(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range page.Value {
			add(n, (*n.ID)[:strings.Index(strings.ToLower(*n.ID), "/networkinterfaces/")])
		}
	}
	return out
}

// poolMachines returns the names of the machines whose ip configurations are in the pool (from
// the pool's backendIPConfigurations), and how many back-references the pool has.
func (e *ipcEnv) poolMachines(t *testing.T, ctx context.Context, pool string) ([]string, int) {
	return e.lbPoolMachines(t, ctx, testCluster, pool)
}

func (e *ipcEnv) internalPoolMachines(t *testing.T, ctx context.Context, pool string) []string {
	got, _ := e.lbPoolMachines(t, ctx, testCluster+"-internal", pool)
	return got
}

func (e *ipcEnv) lbPoolMachines(t *testing.T, ctx context.Context, lbName, pool string) ([]string, int) {
	t.Helper()
	resp, err := e.clients.Network.NewLoadBalancerBackendAddressPoolsClient().Get(ctx, testRG, lbName, pool, nil)
	if err != nil {
		t.Fatalf("pool %s: %v", pool, err)
	}
	owners := e.ipConfigOwners(t, ctx)
	byID := map[string]string{}
	for _, m := range e.res.Machines {
		byID[strings.ToLower(m.ResourceID)] = m.NodeName
	}
	var names []string
	for _, r := range resp.Properties.BackendIPConfigurations {
		vm, ok := owners[strings.ToLower(*r.ID)]
		if !ok {
			t.Fatalf("pool member %s is no known ip configuration", *r.ID)
		}
		names = append(names, byID[vm])
	}
	sort.Strings(names)
	return names, len(resp.Properties.BackendIPConfigurations)
}

func nodeNames(ns []*v1.Node, skip ...string) []string {
	var out []string
	for _, n := range ns {
		if !slices.Contains(skip, n.Name) {
			out = append(out, n.Name)
		}
	}
	sort.Strings(out)
	return out
}

func (e *ipcEnv) modelHasPool(t *testing.T, ctx context.Context, poolName string) bool {
	t.Helper()
	return e.scaleSetModelHasPool(t, ctx, "pool", poolName)
}

func (e *ipcEnv) scaleSetModelHasPool(t *testing.T, ctx context.Context, scaleSet, poolName string) bool {
	t.Helper()
	ss, err := e.clients.Compute.NewVirtualMachineScaleSetsClient().Get(ctx, testRG, scaleSet, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ss.Properties.VirtualMachineProfile.NetworkProfile.NetworkInterfaceConfigurations {
		for _, c := range n.Properties.IPConfigurations {
			for _, p := range c.Properties.LoadBalancerBackendAddressPools {
				if strings.HasSuffix(strings.ToLower(*p.ID), "/backendaddresspools/"+strings.ToLower(poolName)) {
					return true
				}
			}
		}
	}
	return false
}

func nodeOfKind(ns []*v1.Node, kind string) *v1.Node {
	for _, n := range ns {
		if strings.Contains(strings.ToLower(n.Spec.ProviderID), kind) {
			return n
		}
	}
	return nil
}

func TestNodeIPConfigurationPoolLifecycle(t *testing.T) {
	e := newIPCEnv(t, ipcTopology(false), "")
	ctx := ctxT(t)
	all := e.machineNodes()
	if len(all) != 7 {
		t.Fatalf("%d machines", len(all))
	}
	svc := service("ffffffff-0000-0000-0000-000000000001", "web", nil)
	st, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, all)
	if err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer = *st
	got, refs := e.poolMachines(t, ctx, testCluster)
	if want := nodeNames(all); fmt.Sprint(got) != fmt.Sprint(want) || refs != len(all) {
		t.Fatalf("pool members %v (%d refs), want %v", got, refs, want)
	}
	if !e.modelHasPool(t, ctx, testCluster) || !e.scaleSetModelHasPool(t, ctx, "flex", testCluster) {
		t.Fatal("a scale set model does not reference the pool (new instances would not join)")
	}

	// Steady state: nothing to change, no ARM write.
	before, beforeStats := e.writes(), e.stats()
	if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, all); err != nil {
		t.Fatal(err)
	}
	if after := e.writes(); after != before {
		t.Fatalf("steady-state reconcile wrote %d times:\n%s", after-before, diff(beforeStats, e.stats()))
	}
	t.Logf("steady-state reconcile ARM calls:\n%s", diff(beforeStats, e.stats()))

	// Exclude label: a Uniform instance and an availability-set VM leave the pool.
	uni, flex := nodeOfKind(all, "/virtualmachinescalesets/pool/"), nodeOfKind(all, "flex")
	var asNode *v1.Node
	for _, n := range all {
		if strings.HasPrefix(n.Name, "as") {
			asNode = n
		}
	}
	if uni == nil || flex == nil || asNode == nil {
		t.Fatalf("topology: %v %v %v", uni, flex, asNode)
	}
	uni.Labels[membership.LabelExcludeFromLB] = "true"
	asNode.Labels[membership.LabelExcludeFromLB] = "true"
	if err := e.lb.UpdateLoadBalancer(ctx, testCluster, svc, all); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.poolMachines(t, ctx, testCluster); fmt.Sprint(got) != fmt.Sprint(nodeNames(all, uni.Name, asNode.Name)) {
		t.Fatalf("after exclude: %v", got)
	}
	// Label removed: back in.
	delete(uni.Labels, membership.LabelExcludeFromLB)
	delete(asNode.Labels, membership.LabelExcludeFromLB)
	if err := e.lb.UpdateLoadBalancer(ctx, testCluster, svc, all); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.poolMachines(t, ctx, testCluster); fmt.Sprint(got) != fmt.Sprint(nodeNames(all)) {
		t.Fatalf("after label removal: %v", got)
	}
	// Node deleted (a Flexible scale set VM): removed.
	var rest []*v1.Node
	for _, n := range all {
		if n != flex {
			rest = append(rest, n)
		}
	}
	if err := e.lb.UpdateLoadBalancer(ctx, testCluster, svc, rest); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.poolMachines(t, ctx, testCluster); fmt.Sprint(got) != fmt.Sprint(nodeNames(rest)) {
		t.Fatalf("after node deletion: %v", got)
	}

	// Service deleted: the load balancer goes, and no NIC, instance or model references it.
	if err := e.lb.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
		t.Fatal(err)
	}
	if _, err := e.clients.Network.NewLoadBalancersClient().Get(ctx, testRG, testCluster, nil); err == nil {
		t.Fatal("load balancer not deleted")
	}
	e.assertNoPoolRefs(t, ctx)
	if e.modelHasPool(t, ctx, testCluster) || e.scaleSetModelHasPool(t, ctx, "flex", testCluster) {
		t.Fatal("scale set model still references the deleted pool")
	}
}

// assertNoPoolRefs checks every NIC and Uniform instance for a reference to the cluster's LB.
func (e *ipcEnv) assertNoPoolRefs(t *testing.T, ctx context.Context) {
	t.Helper()
	lbPart := "/loadbalancers/" + testCluster
	for p := e.clients.NodeNetwork.NewInterfacesClient().NewListPager(testRG, nil); p.More(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range page.Value {
			for _, c := range n.Properties.IPConfigurations {
				for _, r := range c.Properties.LoadBalancerBackendAddressPools {
					if strings.Contains(strings.ToLower(*r.ID), lbPart) {
						t.Errorf("NIC %s still references %s", *n.Name, *r.ID)
					}
				}
			}
		}
	}
	for p := e.clients.Compute.NewVirtualMachineScaleSetVMsClient().NewListPager(testRG, "pool", nil); p.More(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, vm := range page.Value {
			for _, n := range vm.Properties.NetworkProfileConfiguration.NetworkInterfaceConfigurations {
				for _, c := range n.Properties.IPConfigurations {
					for _, r := range c.Properties.LoadBalancerBackendAddressPools {
						if strings.Contains(strings.ToLower(*r.ID), lbPart) {
							t.Errorf("instance %s still references %s", *vm.InstanceID, *r.ID)
						}
					}
				}
			}
		}
	}
}

func TestNodeIPConfigurationConcurrentServicesShareNICWrites(t *testing.T) {
	e := newIPCEnv(t, ipcTopology(false), "")
	ctx := ctxT(t)
	all := e.machineNodes()
	before := e.stats()
	const n = 12
	if err := ensureConcurrently(ctx, e.lb, n, 0, func(i int) *v1.Service {
		return service(fmt.Sprintf("%08d-0000-0000-0000-0000000000ff", i), fmt.Sprintf("svc-%d", i), nil)
	}, all); err != nil {
		t.Fatal(err)
	}
	after := e.stats()
	t.Logf("%d concurrent services:\n%s", n, diff(before, after))
	nicPuts := after["PUT microsoft.network/networkinterfaces"] - before["PUT microsoft.network/networkinterfaces"]
	vmPuts := after["PUT microsoft.compute/virtualmachinescalesets/virtualmachines"] - before["PUT microsoft.compute/virtualmachinescalesets/virtualmachines"]
	modelPuts := after["PUT microsoft.compute/virtualmachinescalesets"] - before["PUT microsoft.compute/virtualmachinescalesets"]
	// 2 availability-set + 2 flexible VMs have NICs; 3 Uniform instances.
	if nicPuts != 4 || vmPuts != 3 || modelPuts != 2 {
		t.Fatalf("NIC PUTs %d (want 4, one per NIC), instance PUTs %d (want 3), model PUTs %d (want 2: Uniform and Flexible)", nicPuts, vmPuts, modelPuts)
	}
	if got, _ := e.poolMachines(t, ctx, testCluster); fmt.Sprint(got) != fmt.Sprint(nodeNames(all)) {
		t.Fatalf("pool members %v", got)
	}
}

// TestNodeIPConfigurationDualStack checks that an IPv6 ip configuration joins <cluster>-IPv6.
func TestNodeIPConfigurationDualStack(t *testing.T) {
	e := newIPCEnv(t, ipcTopology(true), "")
	ctx := ctxT(t)
	all := e.machineNodes()
	svc := service("ffffffff-0000-0000-0000-000000000006", "dual", nil)
	pol := v1.IPFamilyPolicyRequireDualStack
	svc.Spec.IPFamilyPolicy = &pol
	svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, all); err != nil {
		t.Fatal(err)
	}
	got4, _ := e.poolMachines(t, ctx, testCluster)
	got6, _ := e.poolMachines(t, ctx, testCluster+"-IPv6")
	if fmt.Sprint(got4) != fmt.Sprint(nodeNames(all)) || fmt.Sprint(got6) != fmt.Sprint(nodeNames(all)) {
		t.Fatalf("IPv4 pool %v, IPv6 pool %v, want every node in both", got4, got6)
	}
	if !e.modelHasPool(t, ctx, testCluster+"-IPv6") {
		t.Fatal("model lacks the IPv6 pool")
	}
	before := e.writes()
	if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, all); err != nil {
		t.Fatal(err)
	}
	if e.writes() != before {
		t.Fatal("dual-stack steady state wrote")
	}
	if err := e.lb.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
		t.Fatal(err)
	}
	e.assertNoPoolRefs(t, ctx)
}

// TestNodeIPConfigurationPreConfiguredPools: with preConfiguredBackendPoolLoadBalancerTypes the
// pools of that load balancer type are someone else's: no NIC or instance is written.
func TestNodeIPConfigurationPreConfiguredPools(t *testing.T) {
	e := newIPCEnv(t, ipcTopology(false), `,"preConfiguredBackendPoolLoadBalancerTypes":"external"`)
	ctx := ctxT(t)
	before := e.stats()
	svc := service("ffffffff-0000-0000-0000-000000000009", "pre", nil)
	if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, e.machineNodes()); err != nil {
		t.Fatal(err)
	}
	after := e.stats()
	for _, k := range []string{"PUT microsoft.network/networkinterfaces", "PUT microsoft.compute/virtualmachinescalesets/virtualmachines",
		"PUT microsoft.compute/virtualmachinescalesets"} {
		if after[k] != before[k] {
			t.Errorf("%s: %d writes to a pre-configured pool's members", k, after[k]-before[k])
		}
	}
	if got, _ := e.poolMachines(t, ctx, testCluster); len(got) != 0 {
		t.Fatalf("pre-configured pool got members %v", got)
	}
}

// TestNodeIPConfigurationShutdownAndScaleOut: a deallocated instance is not added (as the
// existing provider skips it), and an instance added by scaling out joins through the scale set
// model without any pool sync.
func TestNodeIPConfigurationShutdownAndScaleOut(t *testing.T) {
	topo := ipcTopology(false)
	topo.ScaleSets = append(topo.ScaleSets, topology.ScaleSet{ResourceGroup: testRG, Name: "cold", Capacity: 1, PowerState: "deallocated"})
	e := newIPCEnv(t, topo, "")
	ctx := ctxT(t)
	all := e.machineNodes()
	var cold *v1.Node
	for _, n := range all {
		if strings.Contains(n.Spec.ProviderID, "/cold/") {
			cold = n
		}
	}
	if cold == nil || len(all) != 8 {
		t.Fatalf("topology: %d machines", len(all))
	}
	svc := service("ffffffff-0000-0000-0000-00000000000a", "web", nil)
	before := e.stats()
	if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, all); err != nil {
		t.Fatal(err)
	}
	after := e.stats()
	_, refs := e.poolMachines(t, ctx, testCluster)
	if refs != 7 {
		t.Fatalf("%d pool members, want 7 (the deallocated instance left out)", refs)
	}
	if d := after["PUT microsoft.compute/virtualmachinescalesets/virtualmachines"] - before["PUT microsoft.compute/virtualmachinescalesets/virtualmachines"]; d != 3 {
		t.Fatalf("%d instance PUTs, want 3 (the deallocated one is not written)", d)
	}

	// Scale out both scale sets: the new VMs are created from the models, which have the pool.
	ssClient := e.clients.Compute.NewVirtualMachineScaleSetsClient()
	for i, name := range []string{"pool", "flex"} {
		cur, err := ssClient.Get(ctx, testRG, name, nil)
		if err != nil {
			t.Fatal(err)
		}
		capacity := *cur.SKU.Capacity + 1
		p, err := ssClient.BeginUpdate(ctx, testRG, name, armcompute.VirtualMachineScaleSetUpdate{
			SKU: &armcompute.SKU{Name: cur.SKU.Name, Tier: cur.SKU.Tier, Capacity: &capacity}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: 20 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		if _, refs := e.poolMachines(t, ctx, testCluster); refs != 8+i {
			t.Fatalf("after scaling out %s: %d pool members, want %d (new VM from the model)", name, refs, 8+i)
		}
	}
}

// TestNodeIPConfigurationOutOfBandChange: a NIC and an instance changed by someone else after
// the writers cached them are written with a stale If-Match, get 412, are re-read and the pool
// change is re-applied on top of the other change.
func TestNodeIPConfigurationOutOfBandChange(t *testing.T) {
	e := newIPCEnv(t, ipcTopology(false), "")
	ctx := ctxT(t)
	all := e.machineNodes()
	svc := service("ffffffff-0000-0000-0000-00000000000b", "web", nil)
	if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, all); err != nil {
		t.Fatal(err)
	}
	var asNode, uni *v1.Node
	for _, n := range all {
		if strings.HasPrefix(n.Name, "as") {
			asNode = n
		}
	}
	uni = nodeOfKind(all, "/virtualmachinescalesets/pool/")
	asm := e.machine(asNode.Name)
	unim := e.machine(uni.Name)

	// Someone tags the availability-set VM's NIC and the Uniform instance.
	nics := e.clients.NodeNetwork.NewInterfacesClient()
	nicName := ""
	for p := nics.NewListPager(testRG, nil); p.More() && nicName == ""; {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range page.Value {
			if n.Properties.VirtualMachine != nil && strings.EqualFold(*n.Properties.VirtualMachine.ID, asm.ResourceID) {
				nicName = *n.Name
			}
		}
	}
	nic, err := nics.Get(ctx, testRG, nicName, nil)
	if err != nil {
		t.Fatal(err)
	}
	nic.Tags = map[string]*string{"owner": to.Ptr("someone-else")}
	for _, c := range nic.Properties.IPConfigurations {
		c.Properties.Subnet = &armnetwork.Subnet{ID: c.Properties.Subnet.ID}
	}
	np, err := nics.BeginCreateOrUpdate(ctx, testRG, nicName, nic.Interface, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := np.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	vms := e.clients.Compute.NewVirtualMachineScaleSetVMsClient()
	vm, err := vms.Get(ctx, testRG, "pool", unim.InstanceID, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A tags-only write keeps a scale set instance's etag (as in Azure): the other writer also
	// changes the model, so that the cached etag is stale.
	vp, err := vms.BeginUpdate(ctx, testRG, "pool", unim.InstanceID, armcompute.VirtualMachineScaleSetVM{Location: vm.Location,
		Tags:       map[string]*string{"owner": to.Ptr("someone-else")},
		Properties: &armcompute.VirtualMachineScaleSetVMProperties{UserData: to.Ptr("c29tZW9uZS1lbHNl")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vp.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}

	// Exclude both: the cached models are stale, the writes must conflict and be re-applied.
	before := e.sim.Middleware().Stats()
	asNode.Labels[membership.LabelExcludeFromLB] = "true"
	uni.Labels[membership.LabelExcludeFromLB] = "true"
	if err := e.lb.UpdateLoadBalancer(ctx, testCluster, svc, all); err != nil {
		t.Fatal(err)
	}
	after := e.sim.Middleware().Stats()
	conflicts := after.Sum("PUT", "Microsoft.Network/networkInterfaces", 412) - before.Sum("PUT", "Microsoft.Network/networkInterfaces", 412) +
		after.Sum("PUT", "Microsoft.Compute/virtualMachineScaleSets/virtualMachines", 412) -
		before.Sum("PUT", "Microsoft.Compute/virtualMachineScaleSets/virtualMachines", 412)
	// Both writers hold a cached model (cache TTL 120 s): each PUT carries the stale ETag.
	if conflicts != 2 {
		t.Fatalf("%d conflicting PUTs, want 2 (If-Match with the cached ETags)", conflicts)
	}
	if got, _ := e.poolMachines(t, ctx, testCluster); fmt.Sprint(got) != fmt.Sprint(nodeNames(all, asNode.Name, uni.Name)) {
		t.Fatalf("after exclude: %v", got)
	}
	nic, err = nics.Get(ctx, testRG, nicName, nil)
	if err != nil || nic.Tags["owner"] == nil {
		t.Fatalf("the other writer's NIC tag was lost: %v %v", err, nic.Tags)
	}
	vm, err = vms.Get(ctx, testRG, "pool", unim.InstanceID, nil)
	if err != nil || vm.Tags["owner"] == nil {
		t.Fatalf("the other writer's instance tag was lost: %v %v", err, vm.Tags)
	}
}

func (e *ipcEnv) machine(nodeName string) topology.Machine {
	for _, m := range e.res.Machines {
		if m.NodeName == nodeName {
			return m
		}
	}
	return topology.Machine{}
}

// Pool joins change the load balancer on Azure's side (its pools' back-references), so they
// run in the load balancer writer's turn: services written while the instances join are never
// refused with 412, and every service converges on its first try.
func TestPoolJoinsNeverOverlapLoadBalancerWrites(t *testing.T) {
	e := newIPCEnv(t, ipcTopology(false), "")
	ctx := ctxT(t)
	all := e.machineNodes()
	d := func(x time.Duration) middleware.Duration { return middleware.Duration(x) }
	e.sim.Middleware().SetLatency(middleware.LatencyModel{Rules: []middleware.LatencyRule{
		{Class: middleware.Write, ResourceType: "Microsoft.Network/loadBalancers", Delay: d(150 * time.Millisecond)},
		{Class: middleware.Write, Delay: d(200 * time.Millisecond)},
	}})
	// Spread over the time the joins take, so load balancer writes fall inside it.
	if err := ensureConcurrently(ctx, e.lb, 12, 60*time.Millisecond, func(i int) *v1.Service {
		return service(fmt.Sprintf("%08d-0000-0000-0000-0000000000ab", i), fmt.Sprintf("svc-%d", i), nil)
	}, all); err != nil {
		t.Errorf("a service failed: %v", err)
	}
	st := e.sim.Middleware().Stats()
	if c := st.Sum("PUT", "Microsoft.Network/loadBalancers", http.StatusPreconditionFailed); c != 0 {
		t.Errorf("%d load balancer PUTs refused with 412 (of %d)", c, st.Sum("PUT", "Microsoft.Network/loadBalancers", 0))
	}
	if got, _ := e.poolMachines(t, ctx, testCluster); fmt.Sprint(got) != fmt.Sprint(nodeNames(all)) {
		t.Errorf("pool members %v", got)
	}
}
