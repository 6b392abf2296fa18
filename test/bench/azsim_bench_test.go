//go:build bench

package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azarm "github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	azruntime "github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azsim/server"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	"github.com/azure-ccm/azure-ccm/test/bench/report"
)

// azsim bench sizes: 10,000 resources in all, of which the seeded topology
// holds a Uniform scale set (instances are resources), availability-set-less
// VMs with their NICs, and the benchmark adds public IPs, an LB whose frontends
// use them, and NICs.
const (
	azTotal        = 10000
	azScaleSetSize = 2000
	azVMs          = 1500 // + 1500 NICs
	azFrontends    = 400  // public IPs + frontends of one LB
	azPhase        = 3 * time.Second
	azRG           = "rg-bench"
)

var azConcurrencies = []int{1, 8, 32}

type azEnv struct {
	t    *testing.T
	ctx  context.Context
	s    *server.Server
	sub  string
	net  *armnetwork.ClientFactory
	poll *azruntime.PollUntilDoneOptions
}

func azStart(t *testing.T) *azEnv {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	t.Cleanup(cancel)
	s, err := server.Start(ctx, server.Options{IMDSAddr: "off"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	opts := azcore.ClientOptions{Transport: s.HTTPClient(), Cloud: cloud.Configuration{
		ActiveDirectoryAuthorityHost: s.URL() + "/",
		Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
			cloud.ResourceManager: {Endpoint: s.URL(), Audience: "https://management.azure.com/"}}}}
	cred, err := azidentity.NewClientSecretCredential(server.DefaultTenantID, server.DefaultClientID, server.DefaultClientSecret,
		&azidentity.ClientSecretCredentialOptions{ClientOptions: opts, DisableInstanceDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	sub := topology.DefaultSubscriptionID
	nf, err := armnetwork.NewClientFactory(sub, cred, &azarm.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: s.HTTPClient(), Cloud: opts.Cloud}})
	if err != nil {
		t.Fatal(err)
	}
	return &azEnv{t: t, ctx: ctx, s: s, sub: sub, net: nf, poll: &azruntime.PollUntilDoneOptions{Frequency: 10 * time.Millisecond}}
}

func (e *azEnv) id(typ, name string) string {
	return "/subscriptions/" + e.sub + "/resourceGroups/" + azRG + "/providers/Microsoft.Network/" + typ + "/" + name
}

// putPIP creates a Standard public IP; v6 ones come from 2001:db8::/32, since azsim's IPv4
// documentation ranges hold only ~500 addresses and the rate phases create more.
func (e *azEnv) putPIP(name string, v6 bool) error {
	pip := armnetwork.PublicIPAddress{Location: to("eastus"), SKU: &armnetwork.PublicIPAddressSKU{Name: to(armnetwork.PublicIPAddressSKUNameStandard)}}
	if v6 {
		pip.Properties = &armnetwork.PublicIPAddressPropertiesFormat{PublicIPAddressVersion: to(armnetwork.IPVersionIPv6),
			PublicIPAllocationMethod: to(armnetwork.IPAllocationMethodStatic)}
	}
	p, err := e.net.NewPublicIPAddressesClient().BeginCreateOrUpdate(e.ctx, azRG, name, pip, nil)
	if err == nil {
		_, err = p.PollUntilDone(e.ctx, e.poll)
	}
	return err
}

func (e *azEnv) putNIC(name string) error {
	p, err := e.net.NewInterfacesClient().BeginCreateOrUpdate(e.ctx, azRG, name, armnetwork.Interface{
		Location: to("eastus"), Properties: &armnetwork.InterfacePropertiesFormat{IPConfigurations: []*armnetwork.InterfaceIPConfiguration{{
			Name: to("ipconfig1"), Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{
				Subnet:                          &armnetwork.Subnet{ID: to(e.id("virtualNetworks", "vnet") + "/subnets/subnet")},
				LoadBalancerBackendAddressPools: []*armnetwork.BackendAddressPool{{ID: to(e.id("loadBalancers", "kubernetes") + "/backendAddressPools/kubernetes")}},
			}}}}}, nil)
	if err == nil {
		_, err = p.PollUntilDone(e.ctx, e.poll)
	}
	return err
}

func (e *azEnv) putLB(frontends int) error {
	lb := armnetwork.LoadBalancer{Location: to("eastus"), SKU: &armnetwork.LoadBalancerSKU{Name: to(armnetwork.LoadBalancerSKUNameStandard)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{
			BackendAddressPools: []*armnetwork.BackendAddressPool{{Name: to("kubernetes")}},
			Probes: []*armnetwork.Probe{{Name: to("probe"), Properties: &armnetwork.ProbePropertiesFormat{
				Protocol: to(armnetwork.ProbeProtocolTCP), Port: to[int32](10256)}}}}}
	for i := 0; i < frontends; i++ {
		fe := "fe-" + strconv.Itoa(i)
		lb.Properties.FrontendIPConfigurations = append(lb.Properties.FrontendIPConfigurations, &armnetwork.FrontendIPConfiguration{
			Name: to(fe), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{
				PublicIPAddress: &armnetwork.PublicIPAddress{ID: to(e.id("publicIPAddresses", "fe-pip-"+strconv.Itoa(i)))}}})
		if i < 100 { // rules per NIC stay under Azure's 300
			lb.Properties.LoadBalancingRules = append(lb.Properties.LoadBalancingRules, &armnetwork.LoadBalancingRule{
				Name: to("rule-" + strconv.Itoa(i)), Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
					Protocol: to(armnetwork.TransportProtocolTCP), FrontendPort: to[int32](80), BackendPort: to[int32](30080),
					FrontendIPConfiguration: &armnetwork.SubResource{ID: to(e.id("loadBalancers", "kubernetes") + "/frontendIPConfigurations/" + fe)},
					BackendAddressPool:      &armnetwork.SubResource{ID: to(e.id("loadBalancers", "kubernetes") + "/backendAddressPools/kubernetes")},
					Probe:                   &armnetwork.SubResource{ID: to(e.id("loadBalancers", "kubernetes") + "/probes/probe")}}})
		}
	}
	p, err := e.net.NewLoadBalancersClient().BeginCreateOrUpdate(e.ctx, azRG, "kubernetes", lb, nil)
	if err == nil {
		_, err = p.PollUntilDone(e.ctx, e.poll)
	}
	return err
}

// count is the number of resources azsim holds (top-level and standalone, not children).
func (e *azEnv) count() int {
	n := 0
	for _, typ := range []string{"Microsoft.Resources/resourceGroups", "Microsoft.Network/virtualNetworks", "Microsoft.Network/networkSecurityGroups",
		"Microsoft.Network/publicIPAddresses", "Microsoft.Network/loadBalancers", "Microsoft.Network/networkInterfaces",
		"Microsoft.Compute/virtualMachines", "Microsoft.Compute/virtualMachineScaleSets", "Microsoft.Compute/virtualMachineScaleSets/virtualMachines"} {
		n += len(e.s.Engine().ListResources(typ))
	}
	return n
}

// azRun calls op from c goroutines for d and returns completed ops per second.
func azRun(t *testing.T, c int, d time.Duration, op func(worker, i int) error) float64 {
	var done atomic.Int64
	var firstErr atomic.Value
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < c; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				if err := op(w, i); errors.Is(err, errStop) {
					return
				} else if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				done.Add(1)
			}
		}(w)
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		t.Fatalf("concurrency %d: %v", c, err)
	}
	return float64(done.Load()) / time.Since(start).Seconds()
}

func azMem() (heap uint64, rss uint64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseUint(f[1], 10, 64)
				rss = kb << 10
			}
		}
	}
	return ms.HeapInuse, rss
}

// TestAzsimBench measures azsim (in-process, HTTPS, real SDK clients and
// credential) on this machine: SDK GETs/s, PUTs/s (each an LRO: PUT plus a
// status poll plus the final GET) and LIST pages/s at several concurrencies,
// with 10,000 resources held, and the memory that takes.
func TestAzsimBench(t *testing.T) {
	began := time.Now()
	heap0, _ := azMem()
	e := azStart(t)
	var md strings.Builder
	fmt.Fprintf(&md, "# azsim benchmark (%s, GOMAXPROCS=%d)\n\n", time.Now().UTC().Format(time.RFC3339), runtime.GOMAXPROCS(0))

	topo := &topology.Topology{
		ResourceGroups: []string{azRG},
		VirtualNetworks: []topology.VirtualNetwork{{ResourceGroup: azRG, Name: "vnet", AddressPrefixes: []string{"10.0.0.0/8"},
			Subnets: []topology.Subnet{{Name: "subnet", AddressPrefix: "10.0.0.0/14", NetworkSecurityGroup: "nsg"}}}},
		NetworkSecurityGroups: []topology.Named{{ResourceGroup: azRG, Name: "nsg"}},
		ScaleSets: []topology.ScaleSet{ // Azure's limit is 1000 instances per scale set
			{ResourceGroup: azRG, Name: "pool1", Capacity: azScaleSetSize / 2, Zones: []string{"1", "2", "3"}},
			{ResourceGroup: azRG, Name: "pool2", Capacity: azScaleSetSize / 2, Zones: []string{"1", "2", "3"}}},
	}
	for i := 0; i < azVMs; i++ {
		topo.VirtualMachines = append(topo.VirtualMachines, topology.VirtualMachine{ResourceGroup: azRG, Name: fmt.Sprintf("vm-%04d", i)})
	}
	t0 := time.Now()
	if _, err := e.s.Seed(e.ctx, topo); err != nil {
		t.Fatal(err)
	}
	seedTime := time.Since(t0)
	t.Logf("seeded %d resources in %s", e.count(), seedTime)

	// The LB's frontends and their public IPs.
	t0 = time.Now()
	azRun(t, 8, time.Hour, func(w, i int) error {
		n := w + 8*i
		if n >= azFrontends {
			return errStop
		}
		return e.putPIP("fe-pip-"+strconv.Itoa(n), false)
	})
	if err := e.putLB(azFrontends); err != nil {
		t.Fatal(err)
	}
	lbTime := time.Since(t0)
	t.Logf("LB with %d frontends in %s", azFrontends, lbTime)

	type row struct {
		op   string
		c    int
		rate float64
	}
	var rows []row
	// PUT: new Standard public IPs.
	var pipSeq atomic.Int64
	for _, c := range azConcurrencies {
		r := azRun(t, c, azPhase, func(w, i int) error { return e.putPIP("pip-"+strconv.FormatInt(pipSeq.Add(1), 10), true) })
		rows = append(rows, row{"PUT publicIPAddress (create, IPv6)", c, r})
		t.Logf("PUT publicIPAddress c=%d: %.0f/s", c, r)
	}
	// PUT: NICs joining the LB pool (every write recomputes the pool's back-references).
	var nicSeq atomic.Int64
	for _, c := range azConcurrencies {
		r := azRun(t, c, azPhase, func(w, i int) error { return e.putNIC("nic-" + strconv.FormatInt(nicSeq.Add(1), 10)) })
		rows = append(rows, row{"PUT networkInterface (create, joins LB pool)", c, r})
		t.Logf("PUT networkInterface c=%d: %.0f/s", c, r)
	}
	// Fill up to azTotal with NICs in the pool.
	t0 = time.Now()
	missing := azTotal - e.count()
	if missing > 0 {
		var fill atomic.Int64
		azRun(t, 8, time.Hour, func(w, i int) error {
			if fill.Add(1) > int64(missing) {
				return errStop
			}
			return e.putNIC("fill-nic-" + strconv.FormatInt(nicSeq.Add(1), 10))
		})
	}
	fillTime := time.Since(t0)
	t.Logf("filled to %d resources in %s", e.count(), fillTime)
	total := e.count()

	pips, nics := e.net.NewPublicIPAddressesClient(), e.net.NewInterfacesClient()
	for _, c := range azConcurrencies {
		r := azRun(t, c, azPhase, func(w, i int) error {
			n := rand.IntN(int(pipSeq.Load())) + 1
			_, err := pips.Get(e.ctx, azRG, "pip-"+strconv.Itoa(n), nil)
			return err
		})
		rows = append(rows, row{"GET publicIPAddress", c, r})
	}
	for _, c := range azConcurrencies {
		r := azRun(t, c, azPhase, func(w, i int) error {
			_, err := nics.Get(e.ctx, azRG, "vm-"+fmt.Sprintf("%04d", rand.IntN(azVMs))+"-nic", nil)
			return err
		})
		rows = append(rows, row{"GET networkInterface", c, r})
	}
	lbs := e.net.NewLoadBalancersClient()
	r := azRun(t, 1, azPhase, func(w, i int) error {
		_, err := lbs.Get(e.ctx, azRG, "kubernetes", nil)
		return err
	})
	rows = append(rows, row{fmt.Sprintf("GET loadBalancer (%d frontends)", azFrontends), 1, r})
	for _, c := range []int{1, 8} {
		r := azRun(t, c, azPhase, func(w, i int) error {
			pager := pips.NewListPager(azRG, nil)
			_, err := pager.NextPage(e.ctx) // first page: 100 items
			return err
		})
		rows = append(rows, row{"LIST publicIPAddresses (first page of 100)", c, r})
	}
	t0 = time.Now()
	if err := e.putLB(azFrontends); err != nil {
		t.Fatal(err)
	}
	lbPut := time.Since(t0)

	heap, rss := azMem()
	fmt.Fprintf(&md, "%d resources held (2 Uniform scale sets with %d instances, %d VMs with NICs, %d public IPs, an LB with %d frontends, 100 rules and a pool of %d NIC ip configurations, NICs).\n",
		total, azScaleSetSize, azVMs, azFrontends+int(pipSeq.Load()), azFrontends, azScaleSetSize+int(nicSeq.Load()))
	fmt.Fprintf(&md, "Seeding the topology took %s, the LB and its public IPs %s, the NIC fill %s.\n", seedTime.Round(time.Millisecond),
		lbTime.Round(time.Millisecond), fillTime.Round(time.Millisecond))
	fmt.Fprintf(&md, "One SDK operation = one SDK call; a PUT is an LRO (PUT, a status poll, the final GET). Phases last %s.\n\n", azPhase)
	fmt.Fprintf(&md, "| operation | concurrency | SDK ops/s |\n|---|---:|---:|\n")
	for _, x := range rows {
		fmt.Fprintf(&md, "| %s | %d | %.0f |\n", x.op, x.c, x.rate)
	}
	fmt.Fprintf(&md, "| PUT loadBalancer (%d frontends, full replace) | 1 | %.1f |\n", azFrontends, 1/lbPut.Seconds())
	fmt.Fprintf(&md, "\nMemory with %d resources (benchmark process, azsim in-process): Go heap in use after GC %.0f MiB (%.0f MiB more than before azsim started), RSS %.0f MiB.\n",
		total, float64(heap)/(1<<20), (float64(heap)-float64(heap0))/(1<<20), float64(rss)/(1<<20))
	fmt.Fprintf(&md, "Total time %s.\n", time.Since(began).Round(time.Second))
	fmt.Print(md.String())
	dir := os.Getenv("AZURE_CCM_BENCH_OUT")
	if dir == "" {
		dir = filepath.Join("..", "..", "_output", "bench")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "azsim.md"), []byte(md.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	res := newResult("azsim", "azsim throughput and memory", "TestAzsimBench")
	res.Description = fmt.Sprintf("azsim in-process over HTTPS, driven by the real SDK clients (armnetwork/v9) with a client-secret "+
		"credential, no latency model. It holds %d resources: 2 Uniform scale sets of %d instances in all, %d VMs with NICs, "+
		"%d public IPs, an LB with %d frontends, 100 rules and a pool of NIC ip configurations, and NICs. One SDK operation is "+
		"one SDK call; a PUT is an LRO (PUT, a status poll, the final GET). Each rate is measured for %s. Memory is the "+
		"benchmark process's (azsim in-process) after GC.", total, azScaleSetSize, azVMs, azFrontends+int(pipSeq.Load()), azFrontends, azPhase)
	res.Config = map[string]string{"resources": fmt.Sprint(total), "GOMAXPROCS": fmt.Sprint(runtime.GOMAXPROCS(0)), "phase": azPhase.String()}
	ph := report.Phase{Name: "SDK operations per second", Variant: "azsim", Metrics: map[string]float64{}}
	for _, x := range rows {
		ph.Metrics[fmt.Sprintf("%s, concurrency %d (ops/s)", x.op, x.c)] = x.rate
	}
	ph.Metrics[fmt.Sprintf("PUT loadBalancer (%d frontends, full replace), concurrency 1 (ops/s)", azFrontends)] = 1 / lbPut.Seconds()
	ph.Metrics[fmt.Sprintf("Go heap in use with %d resources (MiB)", total)] = float64(heap) / (1 << 20)
	ph.Metrics[fmt.Sprintf("process RSS with %d resources (MiB)", total)] = float64(rss) / (1 << 20)
	ph.Metrics["seeding the topology (s)"] = seedTime.Seconds()
	res.Phases = []report.Phase{ph}
	best := func(prefix string) float64 {
		var m float64
		for _, x := range rows {
			if strings.HasPrefix(x.op, prefix) {
				m = max(m, x.rate)
			}
		}
		return m
	}
	res.Headline = []string{fmt.Sprintf("up to %.0f SDK GETs/s and %.0f SDK PUTs/s (LROs) on this machine; %.0f MiB heap (%.0f MiB RSS) with %d resources",
		best("GET publicIPAddress"), best("PUT publicIPAddress"), float64(heap)/(1<<20), float64(rss)/(1<<20), total)}
	res.Goals = []report.Goal{{Name: "resources held", Want: fmt.Sprintf("≥ %d", azTotal), Got: fmt.Sprint(total), Met: total >= azTotal}}
	writeResult(t, res)
	if total < azTotal {
		t.Errorf("only %d resources", total)
	}
}

var errStop = fmt.Errorf("stop")

func to[T any](v T) *T { return &v }
