package poolmigration_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/client"
	"github.com/azure-ccm/azure-ccm/internal/azsim/middleware"
	"github.com/azure-ccm/azure-ccm/internal/azsim/server"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/poolmigration"
	"github.com/azure-ccm/azure-ccm/internal/nodes"
	"github.com/azure-ccm/azure-ccm/internal/writers"
)

const (
	rg      = "rg-cluster"
	cluster = "kubernetes"
)

// nicEstate is a cluster on NIC-based pools: a Standard load balancer whose pool holds the
// availability set's VMs (standalone NICs) and a Uniform scale set's instances (model and
// instance references), with services' public frontends and rules on the pool.
func nicEstate(services int) (*topology.Topology, []string) {
	pool := []topology.PoolRef{{LoadBalancer: cluster, Pool: cluster}}
	t := &topology.Topology{
		Location:       "eastus",
		ResourceGroups: []string{rg},
		VirtualNetworks: []topology.VirtualNetwork{{ResourceGroup: rg, Name: "vnet", AddressPrefixes: []string{"10.0.0.0/8"},
			Subnets: []topology.Subnet{{Name: "subnet", AddressPrefix: "10.240.0.0/16"}}}},
		NetworkSecurityGroups: []topology.Named{{ResourceGroup: rg, Name: "nsg"}},
		AvailabilitySets:      []topology.AvailabilitySet{{ResourceGroup: rg, Name: "as", VMs: 2, LoadBalancerPools: pool}},
		ScaleSets:             []topology.ScaleSet{{ResourceGroup: rg, Name: "pool1", Capacity: 2, LoadBalancerPools: pool}},
	}
	lb := topology.LoadBalancer{ResourceGroup: rg, Name: cluster, BackendPools: []string{cluster}}
	var uids []string
	for i := 0; i < services; i++ {
		uid := fmt.Sprintf("%08x-0000-4000-8000-%012x", i+1, i+1)
		fe := naming.ServiceLBName(types.UID(uid))
		pip := naming.PublicIPName(cluster, fe, "", false, naming.IPv4)
		t.PublicIPs = append(t.PublicIPs, topology.PublicIP{ResourceGroup: rg, Name: pip})
		lb.Frontends = append(lb.Frontends, topology.Frontend{Name: fe, PublicIP: pip})
		lb.Rules = append(lb.Rules, topology.Rule{Name: fe + "-TCP-80", Frontend: fe, BackendPool: cluster, Port: 80})
		uids = append(uids, uid)
	}
	t.LoadBalancers = []topology.LoadBalancer{lb}
	return t, uids
}

type estate struct {
	sim     *server.Server
	res     *topology.Result
	cfg     *config.Config
	clients *arm.Clients
	kube    *fake.Clientset
	// ipOf maps every ip configuration ID (lower case) of the machines to its address.
	ipOf map[string]string
}

func newEstate(t *testing.T, services int, useAPI bool) *estate {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Long-running operations take 100ms, so the samples see the states between writes.
	sim, err := server.Start(context.Background(), server.Options{IMDSAddr: "off", LRODuration: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	topo, uids := nicEstate(services)
	res, err := sim.Seed(ctx, topo)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf(`{"cloud":"AzureStackCloud","disableAzureStackCloud":true,"tenantId":%q,"subscriptionId":%q,
		"aadClientId":%q,"aadClientSecret":%q,"resourceGroup":%q,"location":"eastus","vnetName":"vnet","subnetName":"subnet",
		"vnetResourceGroup":%q,"securityGroupName":"nsg","loadBalancerSku":"standard","vmType":"vmss",
		"loadBalancerBackendPoolConfigurationType":"nodeIP","enableMigrateToIPBasedBackendPoolAPI":%t}`,
		server.DefaultTenantID, res.SubscriptionID, server.DefaultClientID, server.DefaultClientSecret, rg, rg, useAPI)), nil)
	if err != nil {
		t.Fatal(err)
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
	e := &estate{sim: sim, res: res, cfg: cfg, clients: clients, kube: fake.NewClientset(), ipOf: map[string]string{}}
	for i, uid := range uids {
		svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("svc-%02d", i), UID: types.UID(uid)},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Name: "http", Port: 80, NodePort: 30080, Protocol: v1.ProtocolTCP}}}}
		if _, err := e.kube.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range res.Machines {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: m.NodeName, Labels: map[string]string{}}, Spec: v1.NodeSpec{ProviderID: m.ProviderID}}
		for _, ip := range m.InternalIPs {
			n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
		}
		if _, err := e.kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, nic := range e.nics(t, ctx) {
		for _, c := range nic.Properties.IPConfigurations {
			e.ipOf[strings.ToLower(*c.ID)] = *c.Properties.PrivateIPAddress
		}
	}
	if len(e.ipOf) != len(res.Machines) {
		t.Fatalf("%d ip configurations for %d machines", len(e.ipOf), len(res.Machines))
	}
	return e
}

// nics are every standalone and scale set instance NIC.
func (e *estate) nics(t *testing.T, ctx context.Context) []*armnetwork.Interface {
	t.Helper()
	var out []*armnetwork.Interface
	p := e.clients.Network.NewInterfacesClient().NewListPager(rg, nil)
	for p.More() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Value...)
	}
	sp := e.clients.Network.NewInterfacesClient().NewListVirtualMachineScaleSetNetworkInterfacesPager(rg, "pool1", nil)
	for sp.More() {
		page, err := sp.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Value...)
	}
	return out
}

// options is what a fresh CCM start builds (no state carried over from a previous run).
func (e *estate) options(rec record.EventRecorder) poolmigration.Options {
	ws := writers.New(writers.Options{Network: e.clients.Network, NodeNetwork: e.clients.NodeNetwork, Compute: e.clients.Compute,
		PollFrequency: 20 * time.Millisecond})
	return poolmigration.Options{Config: e.cfg, ClusterName: cluster, Writers: ws, Caches: e.clients.Caches,
		Nodes: nodes.NewResolver(e.cfg, e.clients.Caches, nil), Kube: e.kube, Recorder: rec, Backoff: 50 * time.Millisecond,
		APIWait: 10 * time.Second}
}

func (e *estate) lb(ctx context.Context) (*armnetwork.LoadBalancer, error) {
	r, err := e.clients.Network.NewLoadBalancersClient().Get(ctx, rg, cluster, nil)
	if err != nil {
		return nil, err
	}
	return &r.LoadBalancer, nil
}

// uncovered are the machines' addresses that some rule's pool does not hold (as a NIC-based
// member or an address entry): traffic of that rule would not reach them.
func (e *estate) uncovered(lb *armnetwork.LoadBalancer) []string {
	pools := map[string]*armnetwork.BackendAddressPool{}
	for _, p := range lb.Properties.BackendAddressPools {
		pools[strings.ToLower(*p.ID)] = p
	}
	var missing []string
	for _, r := range lb.Properties.LoadBalancingRules {
		held := map[string]bool{}
		if r.Properties.BackendAddressPool != nil {
			if p := pools[strings.ToLower(*r.Properties.BackendAddressPool.ID)]; p != nil && p.Properties != nil {
				for _, c := range p.Properties.BackendIPConfigurations {
					held[e.ipOf[strings.ToLower(*c.ID)]] = true
				}
				for _, a := range p.Properties.LoadBalancerBackendAddresses {
					if a.Properties != nil && a.Properties.IPAddress != nil {
						held[*a.Properties.IPAddress] = true
					}
				}
			}
		}
		for _, m := range e.res.Machines {
			if !held[m.InternalIPs[0]] {
				missing = append(missing, *r.Name+"→"+m.NodeName)
			}
		}
	}
	return missing
}

// sample reads the load balancer every 20ms until stop and returns every instant a rule's
// pool missed a node.
func (e *estate) sample(t *testing.T) (stop func() []string) {
	var (
		mu   sync.Mutex
		bad  []string
		n    int
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			lb, err := e.lb(ctx)
			cancel()
			mu.Lock()
			if err == nil {
				n++
				if m := e.uncovered(lb); len(m) > 0 {
					bad = append(bad, fmt.Sprintf("sample %d: %v", n, m))
				}
			}
			mu.Unlock()
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond): // the sampling pace
			}
		}
	}()
	return func() []string {
		close(done)
		wg.Wait()
		t.Logf("%d samples of the load balancer", n)
		return bad
	}
}

// check asserts the end state: the pool is IP-based with every machine's address, every rule
// uses it, no staging pool is left, and no NIC, scale set instance or scale set model
// references it.
func (e *estate) check(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lb, err := e.lb(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range lb.Properties.BackendAddressPools {
		names = append(names, *p.Name)
	}
	if !slices.Equal(names, []string{cluster}) {
		t.Errorf("pools %v, want only %s", names, cluster)
	}
	poolID := *lb.ID + "/backendAddressPools/" + cluster
	for _, r := range lb.Properties.LoadBalancingRules {
		if !strings.EqualFold(*r.Properties.BackendAddressPool.ID, poolID) {
			t.Errorf("rule %s uses %s", *r.Name, *r.Properties.BackendAddressPool.ID)
		}
	}
	if m := e.uncovered(lb); len(m) > 0 {
		t.Errorf("not served: %v", m)
	}
	for _, p := range lb.Properties.BackendAddressPools {
		if p.Properties != nil && len(p.Properties.BackendIPConfigurations) > 0 {
			t.Errorf("pool %s still has NIC-based members", *p.Name)
		}
	}
	for _, nic := range e.nics(t, ctx) {
		for _, c := range nic.Properties.IPConfigurations {
			for _, ref := range c.Properties.LoadBalancerBackendAddressPools {
				t.Errorf("ip configuration %s still references %s", *c.ID, *ref.ID)
			}
		}
	}
	ss, err := e.clients.Compute.NewVirtualMachineScaleSetsClient().Get(ctx, rg, "pool1", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, nc := range ss.Properties.VirtualMachineProfile.NetworkProfile.NetworkInterfaceConfigurations {
		for _, c := range nc.Properties.IPConfigurations {
			for _, ref := range c.Properties.LoadBalancerBackendAddressPools {
				t.Errorf("scale set model still references %s", *ref.ID)
			}
		}
	}
	vp := e.clients.Compute.NewVirtualMachineScaleSetVMsClient().NewListPager(rg, "pool1", nil)
	for vp.More() {
		page, err := vp.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, vm := range page.Value {
			for _, nc := range vmNetworkConfigs(vm) {
				for _, c := range nc.Properties.IPConfigurations {
					for _, ref := range c.Properties.LoadBalancerBackendAddressPools {
						t.Errorf("scale set instance %s still references %s", *vm.Name, *ref.ID)
					}
				}
			}
		}
	}
}

func vmNetworkConfigs(vm *armcompute.VirtualMachineScaleSetVM) []*armcompute.VirtualMachineScaleSetNetworkConfiguration {
	if vm.Properties == nil || vm.Properties.NetworkProfileConfiguration == nil {
		return nil
	}
	return vm.Properties.NetworkProfileConfiguration.NetworkInterfaceConfigurations
}

func reasons(rec *record.FakeRecorder) map[string]int {
	out := map[string]int{}
	for {
		select {
		case ev := <-rec.Events:
			out[strings.Fields(ev)[1]]++
		default:
			return out
		}
	}
}

// TestMigrationAgainstAzsim migrates a NIC-based pool with both paths while sampling the load
// balancer: no sample has a rule whose pool misses a node, and the end state has nothing left
// referencing the pool from NICs, instances or models.
func TestMigrationAgainstAzsim(t *testing.T) {
	for _, useAPI := range []bool{false, true} {
		t.Run(fmt.Sprintf("migrateAPI=%t", useAPI), func(t *testing.T) {
			e := newEstate(t, 5, useAPI)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			rec := record.NewFakeRecorder(1000)
			stop := e.sample(t)
			res, err := poolmigration.Run(ctx, e.options(rec))
			if bad := stop(); len(bad) > 0 {
				t.Errorf("a rule's pool missed nodes: %v", bad)
			}
			if err != nil || res.Outcome != poolmigration.ResultSuccess {
				t.Fatalf("run: %+v %v", res, err)
			}
			t.Logf("steps %v in %s", res.Steps, res.Duration.Round(time.Millisecond))
			e.check(t)
			if r := reasons(rec); r[poolmigration.ReasonMigrating] != 5 || r[poolmigration.ReasonMigrated] != 5 {
				t.Errorf("events %v, want %s and %s on each of the 5 services", r, poolmigration.ReasonMigrating, poolmigration.ReasonMigrated)
			}
			res2, err := poolmigration.Run(ctx, e.options(nil))
			if err != nil || res2.Outcome != poolmigration.ResultNotNeeded {
				t.Fatalf("second run: %+v %v", res2, err)
			}
		})
	}
}

// TestMigrationResumesAfterCrash stops the migration after each phase (a killed CCM makes no
// further call) and starts it again with fresh state: it converges, and no sample across both
// runs misses a node.
func TestMigrationResumesAfterCrash(t *testing.T) {
	for _, useAPI := range []bool{false, true} {
		phases := []poolmigration.Phase{poolmigration.PhaseStage, poolmigration.PhaseDetachModels, poolmigration.PhaseDetachNodes}
		if useAPI {
			phases = []poolmigration.Phase{poolmigration.PhaseMigrateAPI, poolmigration.PhaseDetachModels}
		}
		for _, stop := range phases {
			t.Run(fmt.Sprintf("migrateAPI=%t/%s", useAPI, stop), func(t *testing.T) {
				e := newEstate(t, 3, useAPI)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				stopSampling := e.sample(t)
				crashCtx, crash := context.WithCancel(ctx)
				o := e.options(nil)
				o.Attempts = 1
				ran := false
				o.AfterPhase = func(p poolmigration.Phase) {
					if p == stop {
						ran = true
						crash()
					}
				}
				if _, err := poolmigration.Run(crashCtx, o); !errors.Is(err, context.Canceled) && !ran {
					t.Fatalf("interrupted run: phase %s never ran (%v)", stop, err)
				}
				res, err := poolmigration.Run(ctx, e.options(nil))
				if bad := stopSampling(); len(bad) > 0 {
					t.Errorf("a rule's pool missed nodes: %v", bad)
				}
				if err != nil || res.Outcome != poolmigration.ResultSuccess {
					t.Fatalf("resumed run: %+v %v", res, err)
				}
				e.check(t)
			})
		}
	}
}

// TestMigrationUnderFaults: failed long-running operations (the write may or may not have
// landed) and 412s on a share of the writes, in any phase: the executor re-reads, re-plans and
// converges, and no sample misses a node.
func TestMigrationUnderFaults(t *testing.T) {
	for _, useAPI := range []bool{false, true} {
		t.Run(fmt.Sprintf("migrateAPI=%t", useAPI), func(t *testing.T) {
			e := newEstate(t, 3, useAPI)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			for _, f := range []client.Fault{
				{Kind: middleware.FaultLROFailed, Class: middleware.Write, Rate: 0.3, Count: 6},
				{Kind: middleware.FaultPrecondition, Class: middleware.Write, Rate: 0.3, Count: 6},
			} {
				if _, err := e.sim.Client().AddFault(ctx, f); err != nil {
					t.Fatal(err)
				}
			}
			stop := e.sample(t)
			o := e.options(nil)
			o.Attempts, o.Backoff = 40, 10*time.Millisecond
			res, err := poolmigration.Run(ctx, o)
			if bad := stop(); len(bad) > 0 {
				t.Errorf("a rule's pool missed nodes: %v", bad)
			}
			if err != nil {
				t.Fatalf("%+v: %v", res, err)
			}
			faults, err := e.sim.Client().Faults(ctx)
			if err != nil {
				t.Fatal(err)
			}
			hits := 0
			for _, f := range faults {
				hits += f.Hits
			}
			if hits == 0 {
				t.Fatal("no fault was injected")
			}
			t.Logf("%d faults injected; steps %v", hits, res.Steps)
			e.check(t)
		})
	}
}
