package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/internal/azsim/middleware"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/poolmigration"
	"github.com/azure-ccm/azure-ccm/test/framework"
	"github.com/azure-ccm/azure-ccm/test/framework/azurenames"
)

// pmExitEnv makes the CCM exit after the named pool migration phase (cmd/.../poolmigration.go).
const pmExitEnv = "AZURE_CCM_POOL_MIGRATION_EXIT_AFTER"

// pmTopology: the default scale set (3 Uniform instances: model and instance references) plus
// an availability set of 2 VMs (standalone NICs), so both kinds of NIC-based member move.
func pmTopology() *topology.Topology {
	t := lbTopology()
	t.AvailabilitySets = append(t.AvailabilitySets, topology.AvailabilitySet{ResourceGroup: "rg-cluster", Name: "as0", VMs: 2})
	return t
}

// pmEnv is a cluster whose CCM ran on NIC-based pools with services, then stopped.
type pmEnv struct {
	*lbEnv
	compute *armcompute.ClientFactory
	// ips are the services' addresses before the migration.
	ips map[string]string
	// ipOf maps every node ip configuration (lower case) to its address.
	ipOf map[string]string
}

func pmStart(t *testing.T, services int) *pmEnv {
	t.Helper()
	e := framework.Start(t, framework.Options{Topology: pmTopology()})
	nodesRequireBinary(t, framework.CCMBinaryName)
	e.CreateNodes(framework.NodeOptions{ProviderID: true}, e.Machines...)
	e.StartCCM()
	for _, m := range e.Machines {
		e.WaitFor("node "+m.NodeName+" initialized", e.NodeInitialized(m.NodeName), lbWait)
	}
	f, err := lbARMClient(e.Azure)
	if err != nil {
		t.Fatal(err)
	}
	c, err := pmComputeClient(e.Azure)
	if err != nil {
		t.Fatal(err)
	}
	p := &pmEnv{lbEnv: &lbEnv{Env: e, t: t, net: f, rg: e.Azure.ResourceGroup, ns: "default"}, compute: c,
		ips: map[string]string{}, ipOf: map[string]string{}}
	for i := 0; i < services; i++ {
		p.create(lbService(fmt.Sprintf("pm-%02d", i), nil))
	}
	for i := 0; i < services; i++ {
		name := fmt.Sprintf("pm-%02d", i)
		s := p.waitIP(name)
		p.ips[name] = ingressIPs(s)[0]
	}
	ctx := lbCtx(t)
	for _, nic := range p.nics(ctx) {
		for _, c := range nic.Properties.IPConfigurations {
			p.ipOf[strings.ToLower(*c.ID)] = *c.Properties.PrivateIPAddress
		}
	}
	p.waitFor("every node a NIC-based member of the pool of every rule", func(ctx context.Context) (bool, error) {
		lb, err := p.lb(ctx)
		if err != nil {
			return false, err
		}
		members := 0
		for _, pool := range lb.Properties.BackendAddressPools {
			if *pool.Name == lbCluster && pool.Properties != nil {
				members = len(pool.Properties.BackendIPConfigurations)
			}
		}
		if members != len(p.Machines) {
			return false, fmt.Errorf("%d NIC-based members, want %d", members, len(p.Machines))
		}
		if m := p.uncovered(lb); len(m) > 0 {
			return false, fmt.Errorf("not served: %v", m)
		}
		return len(lb.Properties.LoadBalancingRules) == services, fmt.Errorf("%d rules", len(lb.Properties.LoadBalancingRules))
	}, lbWait)
	if err := p.StopCCM(); err != nil {
		t.Fatal(err)
	}
	// ARM-like write latencies (load balancer 1 s, others 300 ms) from here on: the migration's
	// writes take as long as they would in Azure, so the samples fall between its steps too.
	if err := p.Azsim.SetLatency(ctx, middleware.RealisticLatency()); err != nil {
		t.Fatal(err)
	}
	return p
}

// pmComputeClient is a compute SDK client factory logged in to azsim as the CCM's principal.
func pmComputeClient(a *framework.Azure) (*armcompute.ClientFactory, error) {
	opts := azcore.ClientOptions{
		Cloud: cloud.Configuration{
			ActiveDirectoryAuthorityHost: a.URL + "/",
			Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
				cloud.ResourceManager: {Endpoint: a.URL, Audience: "https://management.azure.com/"},
			},
		},
		Transport: a.Server.HTTPClient(),
	}
	cred, err := azidentity.NewClientSecretCredential(a.TenantID, a.ClientID, a.ClientSecret,
		&azidentity.ClientSecretCredentialOptions{ClientOptions: opts, DisableInstanceDiscovery: true})
	if err != nil {
		return nil, err
	}
	return armcompute.NewClientFactory(a.SubscriptionID, cred, &arm.ClientOptions{ClientOptions: opts})
}

func (p *pmEnv) lb(ctx context.Context) (*armnetwork.LoadBalancer, error) {
	r, err := p.net.NewLoadBalancersClient().Get(ctx, p.rg, lbCluster, nil)
	if err != nil {
		return nil, err
	}
	return &r.LoadBalancer, nil
}

// nics are the standalone NICs and the scale set instances' NICs.
func (p *pmEnv) nics(ctx context.Context) []*armnetwork.Interface {
	p.t.Helper()
	var out []*armnetwork.Interface
	pager := p.net.NewInterfacesClient().NewListPager(p.rg, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			p.t.Fatal(err)
		}
		out = append(out, page.Value...)
	}
	sp := p.net.NewInterfacesClient().NewListVirtualMachineScaleSetNetworkInterfacesPager(p.rg, "pool0", nil)
	for sp.More() {
		page, err := sp.NextPage(ctx)
		if err != nil {
			p.t.Fatal(err)
		}
		out = append(out, page.Value...)
	}
	return out
}

// uncovered lists rule→node pairs where the rule's pool holds the node neither as a NIC-based
// member nor as an address entry: that rule's traffic would not reach the node.
func (p *pmEnv) uncovered(lb *armnetwork.LoadBalancer) []string {
	pools := map[string]*armnetwork.BackendAddressPool{}
	for _, pool := range lb.Properties.BackendAddressPools {
		pools[strings.ToLower(*pool.ID)] = pool
	}
	var missing []string
	for _, r := range lb.Properties.LoadBalancingRules {
		held := map[string]bool{}
		if r.Properties.BackendAddressPool != nil {
			if pool := pools[strings.ToLower(*r.Properties.BackendAddressPool.ID)]; pool != nil && pool.Properties != nil {
				for _, c := range pool.Properties.BackendIPConfigurations {
					held[p.ipOf[strings.ToLower(*c.ID)]] = true
				}
				for _, a := range pool.Properties.LoadBalancerBackendAddresses {
					if a.Properties != nil && a.Properties.IPAddress != nil {
						held[*a.Properties.IPAddress] = true
					}
				}
			}
		}
		for _, m := range p.Machines {
			if !held[m.InternalIPs[0]] {
				missing = append(missing, *r.Name+"→"+m.NodeName)
			}
		}
	}
	return missing
}

// sampler reads the load balancer every 250 ms until stopped and keeps every sample in which a
// rule's pool missed a node.
type sampler struct {
	mu      sync.Mutex
	samples int
	errors  int
	// staged counts the samples whose rules used the staging pool (the migration under way).
	staged int
	bad    []string
	stop   chan struct{}
	done   chan struct{}
}

func (p *pmEnv) sample() *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			lb, err := p.lb(ctx)
			cancel()
			s.mu.Lock()
			if err != nil {
				s.errors++
			} else {
				s.samples++
				if m := p.uncovered(lb); len(m) > 0 {
					s.bad = append(s.bad, fmt.Sprintf("%s: %v", time.Now().Format("15:04:05.000"), m))
				}
				if rulesOnStagingPool(lb) {
					s.staged++
				}
			}
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *sampler) finish(t *testing.T) {
	t.Helper()
	close(s.stop)
	<-s.done
	t.Logf("sampled the load balancer %d times every 250ms (%d failed reads), %d with the rules on the staging pool", s.samples, s.errors, s.staged)
	if len(s.bad) > 0 {
		t.Errorf("%d samples had a rule whose pool missed nodes, first: %s", len(s.bad), s.bad[0])
	}
	if s.samples == 0 {
		t.Error("no sample taken")
	}
}

// rulesOnStagingPool reports whether a rule of lb uses the migration's staging pool.
func rulesOnStagingPool(lb *armnetwork.LoadBalancer) bool {
	for _, r := range lb.Properties.LoadBalancingRules {
		if r.Properties.BackendAddressPool != nil && strings.HasSuffix(*r.Properties.BackendAddressPool.ID, azurenames.MigrationPoolSuffix) {
			return true
		}
	}
	return false
}

// migrated is the end state: the cluster pool IP-based with every node's address, every rule
// on it, no staging pool, no NIC, scale set instance or model referencing any pool, every
// service with its old address in its status and on its frontend.
func (p *pmEnv) migrated(ctx context.Context) (bool, error) {
	lb, err := p.lb(ctx)
	if err != nil {
		return false, err
	}
	var names []string
	for _, pool := range lb.Properties.BackendAddressPools {
		names = append(names, *pool.Name)
		if pool.Properties != nil && len(pool.Properties.BackendIPConfigurations) > 0 {
			return false, fmt.Errorf("pool %s has NIC-based members", *pool.Name)
		}
	}
	if !slices.Equal(names, []string{lbCluster}) {
		return false, fmt.Errorf("pools %v", names)
	}
	if got, want := poolIPs(lb, lbCluster), p.nodeIPs(); !slices.Equal(got, want) {
		return false, fmt.Errorf("pool addresses %v, want %v", got, want)
	}
	poolID := strings.ToLower(*lb.ID + "/backendAddressPools/" + lbCluster)
	for _, r := range lb.Properties.LoadBalancingRules {
		if strings.ToLower(*r.Properties.BackendAddressPool.ID) != poolID {
			return false, fmt.Errorf("rule %s uses %s", *r.Name, *r.Properties.BackendAddressPool.ID)
		}
	}
	for _, nic := range p.nics(ctx) {
		for _, c := range nic.Properties.IPConfigurations {
			if n := len(c.Properties.LoadBalancerBackendAddressPools); n > 0 {
				return false, fmt.Errorf("ip configuration %s references %d pools", *c.ID, n)
			}
		}
	}
	ss, err := p.compute.NewVirtualMachineScaleSetsClient().Get(ctx, p.rg, "pool0", nil)
	if err != nil {
		return false, err
	}
	for _, nc := range ss.Properties.VirtualMachineProfile.NetworkProfile.NetworkInterfaceConfigurations {
		for _, c := range nc.Properties.IPConfigurations {
			if n := len(c.Properties.LoadBalancerBackendAddressPools); n > 0 {
				return false, fmt.Errorf("the scale set model references %d pools", n)
			}
		}
	}
	vp := p.compute.NewVirtualMachineScaleSetVMsClient().NewListPager(p.rg, "pool0", nil)
	for vp.More() {
		page, err := vp.NextPage(ctx)
		if err != nil {
			return false, err
		}
		for _, vm := range page.Value {
			if vm.Properties == nil || vm.Properties.NetworkProfileConfiguration == nil {
				continue
			}
			for _, nc := range vm.Properties.NetworkProfileConfiguration.NetworkInterfaceConfigurations {
				for _, c := range nc.Properties.IPConfigurations {
					if n := len(c.Properties.LoadBalancerBackendAddressPools); n > 0 {
						return false, fmt.Errorf("scale set instance %s references %d pools", *vm.Name, n)
					}
				}
			}
		}
	}
	svcs, err := p.Kube.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	for _, s := range svcs.Items {
		want, ok := p.ips[s.Name]
		if !ok {
			continue
		}
		if got := ingressIPs(&s); len(got) != 1 || got[0] != want {
			return false, fmt.Errorf("service %s status %v, want %s", s.Name, got, want)
		}
	}
	st, err := p.state(ctx)
	if err != nil {
		return false, err
	}
	var addrs []string
	for _, pip := range st.PIPs {
		addrs = append(addrs, pipAddress(pip))
	}
	for name, ip := range p.ips {
		if !slices.Contains(addrs, ip) {
			return false, fmt.Errorf("service %s: public IP %s is gone", name, ip)
		}
	}
	if len(lb.Properties.FrontendIPConfigurations) != len(p.ips) {
		return false, fmt.Errorf("%d frontends, want %d", len(lb.Properties.FrontendIPConfigurations), len(p.ips))
	}
	return true, nil
}

// crashAfter starts the CCM with the exit hook on phase ph and waits for it to exit there.
func (p *pmEnv) crashAfter(ph poolmigration.Phase) {
	p.t.Helper()
	p.SetCCMEnv(pmExitEnv + "=" + ph.String())
	p.StartCCM()
	select {
	case <-p.CCM().Done():
	case <-time.After(3 * time.Minute):
		p.t.Fatalf("the CCM did not exit after phase %s (binaries built without -tags testhooks have no exit hook: make build)", ph)
	}
	_ = p.StopCCM() // it exited by itself: that is the point
	log, _ := os.ReadFile(p.CCMLogPath())
	if !strings.Contains(string(log), `"Exiting after pool migration phase (test hook)" phase="`+ph.String()+`"`) {
		p.t.Fatalf("the CCM exited, but not after phase %s", ph)
	}
	p.t.Logf("CCM killed after phase %s", ph)
}

// finishAndCheck starts the CCM without the hook and waits for the end state (and, with events,
// for the services' migration events of that start) and a restart that finds nothing to
// migrate.
func (p *pmEnv) finishAndCheck(events bool) {
	p.t.Helper()
	p.SetCCMEnv()
	p.StartCCM()
	p.waitFor("the IP-based end state", p.migrated, 3*time.Minute)
	if events {
		p.pmEvents()
	}
	const nothing = "Backend pool migration to IP-based: nothing to migrate"
	log, err := os.ReadFile(p.CCMLogPath())
	if err != nil {
		p.t.Fatal(err)
	}
	before := strings.Count(string(log), nothing)
	p.RestartCCM()
	p.waitFor("a restart to find nothing to migrate", func(context.Context) (bool, error) {
		log, err := os.ReadFile(p.CCMLogPath())
		return strings.Count(string(log), nothing) > before, err
	}, time.Minute)
	p.waitFor("the IP-based end state after the restart", p.migrated, time.Minute)
}

// pmEvents checks every service got the migration's events.
func (p *pmEnv) pmEvents() {
	p.t.Helper()
	p.waitFor("the migration events on every service", func(ctx context.Context) (bool, error) {
		evs, err := p.Kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		seen := map[string]map[string]bool{}
		for _, ev := range evs.Items {
			if seen[ev.InvolvedObject.Name] == nil {
				seen[ev.InvolvedObject.Name] = map[string]bool{}
			}
			seen[ev.InvolvedObject.Name][ev.Reason] = true
		}
		for name := range p.ips {
			for _, r := range []string{poolmigration.ReasonMigrating, poolmigration.ReasonMigrated} {
				if !seen[name][r] {
					return false, fmt.Errorf("service %s has no %s event", name, r)
				}
			}
		}
		return true, nil
	}, time.Minute)
}

// TestPoolTypeMigration: a cluster on NIC-based pools (scale set instances and availability-set
// VMs) with 20 services switches azure.json to nodeIP. The CCM is killed after every phase of
// the migration (stage, detach-models, detach-nodes, finish) and started again; the load
// balancer is sampled every 250 ms throughout. No sample has a rule whose pool misses a node,
// every service keeps its IP, and nothing references the pool from a NIC, instance or model.
func TestPoolTypeMigration(t *testing.T) {
	working(t)
	p := pmStart(t, 20)
	if err := p.WriteCloudConfig(lbNodeIPConfig); err != nil {
		t.Fatal(err)
	}
	s := p.sample()
	for _, ph := range []poolmigration.Phase{poolmigration.PhaseStage, poolmigration.PhaseDetachModels,
		poolmigration.PhaseDetachNodes, poolmigration.PhaseFinish} {
		p.crashAfter(ph)
	}
	p.finishAndCheck(false)
	s.finish(t)
	// The staged state spans three CCM starts: the samples must have seen it.
	if s.staged == 0 {
		t.Error("no sample saw the rules on the staging pool")
	}
	// The start that finished was killed right after its last phase, before its events: they
	// are checked by TestPoolTypeMigrationAPI, whose last start runs to the end.
	// Every start resumed where the previous one stopped: each phase ran exactly once.
	log, err := os.ReadFile(p.CCMLogPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, ph := range []string{"stage", "detach-models", "detach-nodes", "finish"} {
		if n := strings.Count(string(log), `"Backend pool migration phase done" phase="`+ph+`"`); n != 1 {
			t.Errorf("phase %s ran %d times", ph, n)
		}
	}
}

// TestPoolTypeMigrationAPI: the same switch with enableMigrateToIPBasedBackendPoolAPI: the
// load balancer's migrateToIpBased converts the pool in place, then the references it leaves on
// the scale set model and instances are removed; the CCM is killed after each phase but the
// last, which the final start runs (with the services' events).
func TestPoolTypeMigrationAPI(t *testing.T) {
	working(t)
	p := pmStart(t, 5)
	cfg := map[string]any{"enableMigrateToIPBasedBackendPoolAPI": true}
	for k, v := range lbNodeIPConfig {
		cfg[k] = v
	}
	if err := p.WriteCloudConfig(cfg); err != nil {
		t.Fatal(err)
	}
	s := p.sample()
	for _, ph := range []poolmigration.Phase{poolmigration.PhaseMigrateAPI, poolmigration.PhaseDetachModels} {
		p.crashAfter(ph)
	}
	p.finishAndCheck(true)
	s.finish(t)
}
