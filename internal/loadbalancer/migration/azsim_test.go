package migration_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

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
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/migration"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
	"github.com/azure-ccm/azure-ccm/internal/nodes"
	"github.com/azure-ccm/azure-ccm/internal/writers"
)

const (
	rg      = "rg-cluster"
	cluster = "kubernetes"
)

// svcSpec is one service of the Basic estate.
type svcSpec struct {
	name, uid string
	internal  bool
	lb        string // Basic load balancer it lives on
	ip        string // internal: its static address
}

// BasicEstate is a cluster as the Basic mode leaves it: an availability set (primary VM set,
// load balancers kubernetes and kubernetes-internal) and a scale set with its own per-VM-set load
// balancer pool1, NIC-based pools, Basic public IPs tagged for their services (every third one
// Dynamic). External services alternate between kubernetes and pool1.
func BasicEstate(external, internal int) (*topology.Topology, []svcSpec) {
	t := &topology.Topology{
		Location:       "eastus",
		ResourceGroups: []string{rg},
		VirtualNetworks: []topology.VirtualNetwork{{ResourceGroup: rg, Name: "vnet", AddressPrefixes: []string{"10.0.0.0/8"},
			Subnets: []topology.Subnet{{Name: "subnet", AddressPrefix: "10.240.0.0/16"}}}},
		NetworkSecurityGroups: []topology.Named{{ResourceGroup: rg, Name: "nsg"}},
		AvailabilitySets: []topology.AvailabilitySet{{ResourceGroup: rg, Name: "as", VMs: 2, LoadBalancerPools: []topology.PoolRef{
			{LoadBalancer: "kubernetes", Pool: cluster}, {LoadBalancer: "kubernetes-internal", Pool: cluster}}}},
		ScaleSets: []topology.ScaleSet{{ResourceGroup: rg, Name: "pool1", Capacity: 2,
			LoadBalancerPools: []topology.PoolRef{{LoadBalancer: "pool1", Pool: cluster}}}},
	}
	lbs := map[string]*topology.LoadBalancer{}
	for _, n := range []string{"kubernetes", "kubernetes-internal", "pool1"} {
		lbs[n] = &topology.LoadBalancer{ResourceGroup: rg, Name: n, SKU: "Basic", BackendPools: []string{cluster}}
	}
	var specs []svcSpec
	for i := 0; i < external+internal; i++ {
		s := svcSpec{name: fmt.Sprintf("svc-%03d", i), uid: fmt.Sprintf("%08x-0000-4000-8000-%012x", i+1, i+1), internal: i >= external}
		fe := naming.ServiceLBName(types.UID(s.uid))
		rule := topology.Rule{Name: fe + "-TCP-80", Frontend: fe, BackendPool: cluster, Port: 80}
		switch {
		case s.internal:
			s.lb, s.ip = "kubernetes-internal", fmt.Sprintf("10.240.1.%d", 10+i)
			lbs[s.lb].Frontends = append(lbs[s.lb].Frontends, topology.Frontend{Name: fe, PrivateIP: s.ip})
		default:
			s.lb = "kubernetes"
			if i%2 == 1 {
				s.lb = "pool1"
			}
			pip := naming.PublicIPName(cluster, fe, "", false, naming.IPv4)
			// Some Basic IPs are Dynamic (as IPv6 ones always were): the migration makes them
			// Static before their frontend goes.
			alloc := "Static"
			if i%3 == 1 {
				alloc = "Dynamic"
			}
			t.PublicIPs = append(t.PublicIPs, topology.PublicIP{ResourceGroup: rg, Name: pip, SKU: "Basic", Allocation: alloc,
				Tags: map[string]string{naming.TagService: "default/" + s.name, naming.TagClusterName: cluster}})
			lbs[s.lb].Frontends = append(lbs[s.lb].Frontends, topology.Frontend{Name: fe, PublicIP: pip})
		}
		lbs[s.lb].Rules = append(lbs[s.lb].Rules, rule)
		specs = append(specs, s)
	}
	for _, n := range []string{"kubernetes", "kubernetes-internal", "pool1"} {
		t.LoadBalancers = append(t.LoadBalancers, *lbs[n])
	}
	return t, specs
}

type estate struct {
	sim     *server.Server
	res     *topology.Result
	cfg     *config.Config
	clients *arm.Clients
	kube    *fake.Clientset
	specs   []svcSpec
	// ips are the services' addresses before the migration (key: name).
	ips map[string]string
}

func newEstate(t *testing.T, external, internal int, lro time.Duration) *estate {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sim, err := server.Start(context.Background(), server.Options{IMDSAddr: "off", LRODuration: lro})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	topo, specs := BasicEstate(external, internal)
	res, err := sim.Seed(ctx, topo)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf(`{"cloud":"AzureStackCloud","disableAzureStackCloud":true,"tenantId":%q,"subscriptionId":%q,
		"aadClientId":%q,"aadClientSecret":%q,"resourceGroup":%q,"location":"eastus","vnetName":"vnet","subnetName":"subnet",
		"securityGroupName":"nsg","loadBalancerSku":"standard","vmType":"vmss"}`,
		server.DefaultTenantID, res.SubscriptionID, server.DefaultClientID, server.DefaultClientSecret, rg)), nil)
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
	e := &estate{sim: sim, res: res, cfg: cfg, clients: clients, kube: fake.NewClientset(), specs: specs, ips: map[string]string{}}
	for _, s := range specs {
		ip := s.ip
		if !s.internal {
			p, err := clients.Network.NewPublicIPAddressesClient().Get(ctx, rg, naming.PublicIPName(cluster, naming.ServiceLBName(types.UID(s.uid)), "", false, naming.IPv4), nil)
			if err != nil {
				t.Fatal(err)
			}
			ip = *p.Properties.IPAddress
		}
		e.ips[s.name] = ip
		svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: s.name, UID: types.UID(s.uid), Annotations: map[string]string{}},
			Spec:   v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Name: "http", Port: 80, NodePort: 30080, Protocol: v1.ProtocolTCP}}},
			Status: v1.ServiceStatus{LoadBalancer: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: ip}}}}}
		if s.internal {
			svc.Annotations[annotations.Internal] = "true"
		}
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
	return e
}

// options builds what a fresh CCM start builds: a new load balancer implementation and
// resolver (no state carried over from a previous run).
func (e *estate) options(t *testing.T, rec record.EventRecorder) migration.Options {
	t.Helper()
	resolver := nodes.NewResolver(e.cfg, e.clients.Caches, nil)
	ws := writers.New(writers.Options{Network: e.clients.Network, NodeNetwork: e.clients.NodeNetwork, Compute: e.clients.Compute,
		PollFrequency: 20 * time.Millisecond})
	parts, err := loadbalancer.Build(loadbalancer.BuildOptions{Config: e.cfg, Writers: ws, PublicIPs: e.clients.Caches.PublicIPs,
		PrivateLinks: e.clients.Caches.PrivateLinkServices,
		Recorder:     rec, Nodes: resolver, Caches: e.clients.Caches})
	if err != nil {
		t.Fatal(err)
	}
	return migration.Options{Config: e.cfg, ClusterName: cluster, Network: e.clients.Network, Compute: e.clients.Compute,
		Writers: ws, Kube: e.kube, Recorder: rec, LoadBalancer: parts.LoadBalancer,
		Backoff: 50 * time.Millisecond,
		VMSetOf: func(ctx context.Context, n *v1.Node) (string, error) {
			inst, err := resolver.Instance(ctx, n)
			if err != nil {
				return "", err
			}
			return inst.VMSet.Name, nil
		}}
}

// check asserts the end state: no Basic load balancer, every service on the Standard load
// balancer of its kind with its old address, every node in both Standard pools, no public IP
// deleted and all of them Standard.
func (e *estate) check(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	net := e.clients.Network
	lbs := map[string]*armnetwork.LoadBalancer{}
	pager := net.NewLoadBalancersClient().NewListPager(rg, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, lb := range page.Value {
			if *lb.SKU.Name == armnetwork.LoadBalancerSKUNameBasic {
				t.Errorf("Basic load balancer %s remains", *lb.Name)
			}
			lbs[*lb.Name] = lb
		}
	}
	pips := map[string]string{} // ID (lower) -> address
	pp := net.NewPublicIPAddressesClient().NewListPager(rg, nil)
	n := 0
	for pp.More() {
		page, err := pp.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range page.Value {
			n++
			if *p.SKU.Name != armnetwork.PublicIPAddressSKUNameStandard {
				t.Errorf("public IP %s is %s", *p.Name, *p.SKU.Name)
			}
			pips[strings.ToLower(*p.ID)] = *p.Properties.IPAddress
		}
	}
	external := 0
	for _, s := range e.specs {
		if !s.internal {
			external++
		}
	}
	if n != external {
		t.Errorf("%d public IPs, want %d (none deleted, none created)", n, external)
	}
	for _, s := range e.specs {
		lb := lbs[naming.LoadBalancerName(cluster, s.internal)]
		fe := naming.ServiceLBName(types.UID(s.uid))
		got := ""
		if lb != nil {
			for _, f := range lb.Properties.FrontendIPConfigurations {
				if *f.Name != fe {
					continue
				}
				if f.Properties.PublicIPAddress != nil {
					got = pips[strings.ToLower(*f.Properties.PublicIPAddress.ID)]
				} else if f.Properties.PrivateIPAddress != nil {
					got = *f.Properties.PrivateIPAddress
				}
			}
			hasRule := false
			for _, r := range lb.Properties.LoadBalancingRules {
				hasRule = hasRule || strings.HasPrefix(*r.Name, fe+"-TCP-80")
			}
			if !hasRule {
				t.Errorf("service %s has no rule on %s", s.name, *lb.Name)
			}
		}
		if got != e.ips[s.name] {
			t.Errorf("service %s: Standard frontend address %q, want %s", s.name, got, e.ips[s.name])
		}
	}
	for _, name := range []string{"kubernetes", "kubernetes-internal"} {
		lb := lbs[name]
		if lb == nil {
			t.Errorf("Standard load balancer %s missing", name)
			continue
		}
		members := 0
		for _, p := range lb.Properties.BackendAddressPools {
			if *p.Name == cluster {
				members = len(p.Properties.BackendIPConfigurations)
			}
		}
		if members != len(e.res.Machines) {
			t.Errorf("%s pool has %d members, want %d", name, members, len(e.res.Machines))
		}
	}
}

func TestMigrationAgainstAzsim(t *testing.T) {
	e := newEstate(t, 4, 2, 0)
	rec := record.NewFakeRecorder(1000)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := e.sim.Client().ResetStats(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := migration.Run(ctx, e.options(t, rec))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != migration.ResultSuccess || res.BasicLBs != 3 || res.PublicIPs != 4 || res.Services != 6 {
		t.Fatalf("result %+v", res)
	}
	if len(res.Downtime) != 6 {
		t.Errorf("downtime measured for %d services: %v", len(res.Downtime), res.Downtime)
	}
	e.check(t)
	reasons := map[string]int{}
	close(rec.Events)
	for ev := range rec.Events {
		reasons[strings.Fields(ev)[1]]++
	}
	if reasons[migration.ReasonMigrating] != 6 || reasons[migration.ReasonMigrated] != 6 || reasons[migration.ReasonNoOutboundRule] != 6 {
		t.Errorf("events %v", reasons)
	}
	// A second start finds nothing to do.
	res2, err := migration.Run(ctx, e.options(t, nil))
	if err != nil || res2.Outcome != migration.ResultNotNeeded {
		t.Fatalf("second run: %+v %v", res2, err)
	}
	e.check(t)
}

// TestMigrationResumesAfterCrash stops the migration after each phase (the next phase's calls
// fail as a killed CCM's would never be made) and starts it again with fresh state: it always
// converges to the same end state.
func TestMigrationResumesAfterCrash(t *testing.T) {
	for _, stop := range migration.Phases()[:len(migration.Phases())-1] {
		t.Run(stop.String(), func(t *testing.T) {
			e := newEstate(t, 2, 1, 0)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			crashCtx, crash := context.WithCancel(ctx)
			o := e.options(t, nil)
			o.Attempts = 1
			o.AfterPhase = func(p migration.Phase) {
				if p == stop {
					crash()
				}
			}
			if _, err := migration.Run(crashCtx, o); !errors.Is(err, context.Canceled) {
				t.Fatalf("interrupted run: %v", err)
			}
			res, err := migration.Run(ctx, e.options(t, nil))
			if err != nil || res.Outcome != migration.ResultSuccess {
				t.Fatalf("resumed run: %+v %v", res, err)
			}
			e.check(t)
		})
	}
}

// TestMigrationFigures prints the ARM calls and per-service windows of a 50-service migration,
// with instant long-running operations and with 1s ones (docs/migration-basic-to-standard.md
// quotes them).
func TestMigrationFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("figures only")
	}
	for _, lro := range []time.Duration{0, time.Second} {
		t.Run(fmt.Sprintf("lro=%s", lro), func(t *testing.T) { figures(t, lro) })
	}
}

func figures(t *testing.T, lro time.Duration) {
	e := newEstate(t, 40, 10, lro)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := e.sim.Client().ResetStats(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := migration.Run(ctx, e.options(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	e.check(t)
	st, err := e.sim.Client().Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	var reads, writes int64
	for _, c := range st.Requests {
		lines = append(lines, fmt.Sprintf("%-6s %-45s %d x%d", c.Method, c.ResourceType, c.Status, c.Count))
		if c.Method == "GET" {
			reads += c.Count
		} else {
			writes += c.Count
		}
	}
	sort.Strings(lines)
	var ds []time.Duration
	for _, d := range res.Downtime {
		ds = append(ds, d)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	t.Logf("50 services (40 public, 10 internal), 4 nodes, 3 Basic LBs: %d ARM reads (incl. LRO polls), %d writes, run %s\n%s",
		reads, writes, res.Duration.Round(time.Millisecond), strings.Join(lines, "\n"))
	t.Logf("window Basic LB deleted → Standard rules: min %s, median %s, max %s",
		ds[0].Round(time.Millisecond), ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
}

// TestMigrationUnderFaults: failed long-running operations (the write may or may not have
// landed) and 412s on a share of the writes, anywhere in any phase: the migration re-reads,
// re-plans and converges to the same end state.
func TestMigrationUnderFaults(t *testing.T) {
	e := newEstate(t, 4, 2, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, f := range []client.Fault{
		{Kind: middleware.FaultLROFailed, Class: middleware.Write, Rate: 0.3, Count: 12},
		{Kind: middleware.FaultLROFailed, Class: middleware.Delete, Rate: 0.5, Count: 2},
		{Kind: middleware.FaultPrecondition, Class: middleware.Write, Rate: 0.2, Count: 8},
	} {
		if _, err := e.sim.Client().AddFault(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	o := e.options(t, nil)
	o.Attempts, o.Backoff = 40, 10*time.Millisecond
	res, err := migration.Run(ctx, o)
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
	t.Logf("%d faults injected; result %s", hits, res.Outcome)
	e.check(t)
}
