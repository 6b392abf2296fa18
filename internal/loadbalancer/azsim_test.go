package loadbalancer

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	armarm "github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/server"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/membership"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/multislb"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
	"github.com/azure-ccm/azure-ccm/internal/writers"
)

const (
	testRG      = "rg-cluster"
	testCluster = "kubernetes"
)

type env struct {
	srv      *server.Server
	net      *armnetwork.ClientFactory
	lb       *LoadBalancer
	placer   *multislb.Placer
	recorder *record.FakeRecorder
	// endpoints answers the placer's EndpointNodes (nil: not known).
	endpoints multislb.EndpointNodesFunc
	cfg       *config.Config
	// buildOpts are the options of the last build (the auditor's twins are built with them).
	buildOpts BuildOptions
}

// build assembles the implementation on the env's azsim, as the CCM does (a fresh writer set:
// nothing cached).
func (e *env) build(t *testing.T, o BuildOptions) {
	t.Helper()
	o.Config, o.Recorder, o.Zones = e.cfg, e.recorder, []string{"1", "2", "3"}
	o.Writers = writers.New(writers.Options{Network: e.net, PollFrequency: 20 * time.Millisecond})
	o.PublicIPs = armarm.NewPublicIPCache("publicips", e.net, 0, nil, nil)
	o.PrivateLinks = armarm.NewPrivateLinkServiceCache(e.net, 0, nil, nil)
	parts, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	e.lb, e.placer, e.buildOpts = parts.LoadBalancer, parts.Placer, o
}

func newEnv(t *testing.T, poolType string) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.Start(ctx, server.Options{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = srv.Close() })
	seedCtx, done := context.WithTimeout(context.Background(), 60*time.Second)
	defer done()
	if _, err := srv.Seed(seedCtx, &topology.Topology{
		ResourceGroups: []string{testRG},
		VirtualNetworks: []topology.VirtualNetwork{{ResourceGroup: testRG, Name: "vnet", AddressPrefixes: []string{"10.0.0.0/8"},
			Subnets: []topology.Subnet{{Name: "subnet", AddressPrefix: "10.240.0.0/16"}}}},
		NetworkSecurityGroups: []topology.Named{{ResourceGroup: testRG, Name: "nsg"}},
	}); err != nil {
		t.Fatal(err)
	}
	opts := azcore.ClientOptions{
		Cloud: cloud.Configuration{
			ActiveDirectoryAuthorityHost: srv.URL() + "/",
			Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
				cloud.ResourceManager: {Endpoint: srv.URL(), Audience: "https://management.azure.com/"},
			},
		},
		Transport: srv.HTTPClient(),
	}
	cred, err := azidentity.NewClientSecretCredential(server.DefaultTenantID, server.DefaultClientID, server.DefaultClientSecret,
		&azidentity.ClientSecretCredentialOptions{ClientOptions: opts, DisableInstanceDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	f, err := armnetwork.NewClientFactory(topology.DefaultSubscriptionID, cred, &arm.ClientOptions{ClientOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{SubscriptionID: topology.DefaultSubscriptionID, ResourceGroup: testRG, Location: "eastus",
		VnetName: "vnet", SubnetName: "subnet", SecurityGroupName: "nsg", LoadBalancerSKU: config.LoadBalancerSKUStandard,
		LoadBalancerBackendPoolConfigurationType: poolType}
	e := &env{srv: srv, net: f, recorder: record.NewFakeRecorder(100), cfg: cfg}
	e.build(t, BuildOptions{})
	return e
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func service(uid, name string, ann map[string]string, ports ...v1.ServicePort) *v1.Service {
	if len(ports) == 0 {
		ports = []v1.ServicePort{{Name: "http", Port: 80, NodePort: 30080, Protocol: v1.ProtocolTCP}}
	}
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(uid), Annotations: ann},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: ports},
	}
}

func node(name, ip string, labels map[string]string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}}}}
}

func (e *env) getLB(t *testing.T, name string) *armnetwork.LoadBalancer {
	t.Helper()
	resp, err := e.net.NewLoadBalancersClient().Get(ctxT(t), testRG, name, nil)
	if err != nil {
		t.Fatalf("get LB %s: %v", name, err)
	}
	return &resp.LoadBalancer
}

func (e *env) nsgRules(t *testing.T) []*armnetwork.SecurityRule {
	t.Helper()
	resp, err := e.net.NewSecurityGroupsClient().Get(ctxT(t), testRG, "nsg", nil)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Properties.SecurityRules
}

func (e *env) writes(t *testing.T) int64 {
	t.Helper()
	st, err := e.srv.Client().Stats(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return st.Writes("") + st.Deletes("")
}

func TestEnsurePublicServiceLifecycle(t *testing.T) {
	e := newEnv(t, config.BackendPoolNodeIP)
	ctx := ctxT(t)
	svc := service("aaaaaaaa-0000-0000-0000-000000000001", "web", nil)
	nodes := []*v1.Node{node("node-0", "10.240.0.4", nil), node("node-1", "10.240.0.5", nil),
		node("cp-0", "10.240.0.10", map[string]string{membership.LabelRoleControlPlane: ""}),
		node("excluded", "10.240.0.11", map[string]string{membership.LabelExcludeFromLB: "true"})}
	st, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Ingress) != 1 || !strings.HasPrefix(st.Ingress[0].IP, "203.0.113.") && !strings.HasPrefix(st.Ingress[0].IP, "198.51.100.") {
		t.Fatalf("status %+v", st)
	}
	svcName := naming.ServiceLBName(svc.UID)
	lb := e.getLB(t, testCluster)
	if len(lb.Properties.FrontendIPConfigurations) != 1 || *lb.Properties.FrontendIPConfigurations[0].Name != svcName ||
		len(lb.Properties.LoadBalancingRules) != 1 || *lb.Properties.LoadBalancingRules[0].Name != svcName+"-TCP-80" ||
		len(lb.Properties.Probes) != 1 {
		t.Fatalf("LB %+v", lb.Properties)
	}
	pip, err := e.net.NewPublicIPAddressesClient().Get(ctx, testRG, "kubernetes-"+svcName, nil)
	if err != nil || *pip.Properties.IPAddress != st.Ingress[0].IP || *pip.Tags[naming.TagService] != "default/web" || len(pip.Zones) != 3 {
		t.Fatalf("PIP %v %+v", err, pip)
	}
	// nodeIP pool: the two eligible nodes, not the control plane or the excluded node.
	pool, err := e.net.NewLoadBalancerBackendAddressPoolsClient().Get(ctx, testRG, testCluster, testCluster, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range pool.Properties.LoadBalancerBackendAddresses {
		got = append(got, *a.Properties.IPAddress)
	}
	if fmt.Sprint(got) != "[10.240.0.4 10.240.0.5]" {
		t.Fatalf("pool members %v", got)
	}
	var allow int
	for _, r := range e.nsgRules(t) {
		if strings.HasPrefix(*r.Name, "k8s-azure-lb_allow_IPv4_") && *r.Properties.DestinationAddressPrefix == st.Ingress[0].IP {
			allow++
		}
	}
	if allow != 1 {
		t.Fatalf("NSG allow rule missing: %d", allow)
	}

	// Steady state: a second reconcile writes nothing to ARM.
	before := e.writes(t)
	svc.Status.LoadBalancer = *st
	if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	if after := e.writes(t); after != before {
		t.Fatalf("steady-state reconcile wrote %d times", after-before)
	}
	got2, exists, err := e.lb.GetLoadBalancer(ctx, testCluster, svc)
	if err != nil || !exists || got2.Ingress[0].IP != st.Ingress[0].IP {
		t.Fatalf("GetLoadBalancer %v %v %v", got2, exists, err)
	}

	// Delete: LB, PIP and NSG rule are gone.
	if err := e.lb.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
		t.Fatal(err)
	}
	if _, err := e.net.NewLoadBalancersClient().Get(ctx, testRG, testCluster, nil); err == nil {
		t.Fatal("empty LB not deleted")
	}
	if _, err := e.net.NewPublicIPAddressesClient().Get(ctx, testRG, "kubernetes-"+svcName, nil); err == nil {
		t.Fatal("managed PIP leaked")
	}
	for _, r := range e.nsgRules(t) {
		if strings.HasPrefix(*r.Name, "k8s-azure-lb") {
			t.Fatalf("NSG rule leaked: %s", *r.Name)
		}
	}
	if _, exists, err := e.lb.GetLoadBalancer(ctx, testCluster, svc); err != nil || exists {
		t.Fatalf("after delete: exists=%v err=%v", exists, err)
	}
}

func TestEnsureInternalService(t *testing.T) {
	e := newEnv(t, config.BackendPoolNodeIP)
	ctx := ctxT(t)
	svc := service("bbbbbbbb-0000-0000-0000-000000000001", "internal", map[string]string{annotations.Internal: "true"})
	st, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, []*v1.Node{node("node-0", "10.240.0.4", nil)})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Ingress) != 1 || !strings.HasPrefix(st.Ingress[0].IP, "10.240.") {
		t.Fatalf("status %+v", st)
	}
	lb := e.getLB(t, testCluster+"-internal")
	fe := lb.Properties.FrontendIPConfigurations[0]
	if len(fe.Zones) != 3 || *fe.Properties.PrivateIPAddress != st.Ingress[0].IP {
		t.Fatalf("frontend %+v zones %v", fe.Properties, fe.Zones)
	}
	// Switch to public: the internal LB loses the service (and is deleted as it is empty).
	svc.Annotations = nil
	if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.net.NewLoadBalancersClient().Get(ctx, testRG, testCluster+"-internal", nil); err == nil {
		t.Fatal("internal LB kept after the service moved")
	}
	e.getLB(t, testCluster)
}

func TestInvalidAnnotationWritesNothing(t *testing.T) {
	e := newEnv(t, config.BackendPoolNodeIP)
	ctx := ctxT(t)
	before := e.writes(t)
	svc := service("cccccccc-0000-0000-0000-000000000001", "bad", map[string]string{annotations.TCPIdleTimeout: "1000"})
	_, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, nil)
	if err == nil || !strings.Contains(err.Error(), annotations.TCPIdleTimeout) {
		t.Fatalf("want annotation error, got %v", err)
	}
	select {
	case ev := <-e.recorder.Events:
		if !strings.Contains(ev, "Warning "+ReasonInvalidAnnotation) || !strings.Contains(ev, "1000") {
			t.Fatalf("event %q", ev)
		}
	default:
		t.Fatal("no Warning event")
	}
	if after := e.writes(t); after != before {
		t.Fatalf("invalid service caused %d ARM writes", after-before)
	}
}

func TestForeignLoadBalancerClassIsLeftAlone(t *testing.T) {
	e := newEnv(t, config.BackendPoolNodeIP)
	svc := service("dddddddd-0000-0000-0000-000000000001", "other", nil)
	class := "example.com/other"
	svc.Spec.LoadBalancerClass = &class
	before := e.writes(t)
	if _, err := e.lb.EnsureLoadBalancer(ctxT(t), testCluster, svc, nil); err == nil {
		t.Fatal("want ImplementedElsewhere")
	}
	if e.writes(t) != before {
		t.Fatal("foreign class caused writes")
	}
}

// ensureConcurrently ensures n services at once (service i from svc(i), started i*spread after
// the first) and returns the first error.
func ensureConcurrently(ctx context.Context, lb *LoadBalancer, n int, spread time.Duration, svc func(i int) *v1.Service, nodes []*v1.Node) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Go(func() {
			// Staggering the starts is the load under test, not a wait for anything.
			time.Sleep(time.Duration(i) * spread)
			_, err := lb.EnsureLoadBalancer(ctx, testCluster, svc(i), nodes)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func TestConcurrentServicesShareLoadBalancerWrites(t *testing.T) {
	e := newEnv(t, config.BackendPoolNodeIP)
	ctx := ctxT(t)
	// Create the LB first so the burst below only adds frontends.
	first := service("eeeeeeee-0000-0000-0000-000000000000", "svc-0", nil)
	if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, first, nil); err != nil {
		t.Fatal(err)
	}
	st0, _ := e.srv.Client().Stats(ctx)
	const n = 12
	if err := ensureConcurrently(ctx, e.lb, n, 0, func(i int) *v1.Service {
		return service(fmt.Sprintf("%08d-0000-0000-0000-00000000000e", i+1), fmt.Sprintf("svc-%d", i+1), nil)
	}, nil); err != nil {
		t.Fatal(err)
	}
	st1, _ := e.srv.Client().Stats(ctx)
	lbPuts := st1.Sum("PUT", "Microsoft.Network/loadBalancers", 0) - st0.Sum("PUT", "Microsoft.Network/loadBalancers", 0)
	lb := e.getLB(t, testCluster)
	if len(lb.Properties.FrontendIPConfigurations) != n+1 || len(lb.Properties.LoadBalancingRules) != n+1 {
		t.Fatalf("frontends %d rules %d", len(lb.Properties.FrontendIPConfigurations), len(lb.Properties.LoadBalancingRules))
	}
	if lbPuts >= n {
		t.Fatalf("%d LB PUTs for %d services: no batching", lbPuts, n)
	}
	t.Logf("%d services: %d LB PUTs", n, lbPuts)
}

// A new service's public IP is created from what the public IP list said: no GET of a missing
// address (404) and no GET of the one just written. (A stale list costs a refused conditional
// create and a read: writer.TestSeed.)
func TestNewPublicIPsNeedNoLookup(t *testing.T) {
	e := newEnv(t, config.BackendPoolNodeIP)
	ctx := ctxT(t)
	if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, service("eeeeeeee-0000-0000-0000-000000000000", "svc-0", nil), nil); err != nil {
		t.Fatal(err)
	}
	st0, _ := e.srv.Client().Stats(ctx)
	const n = 6
	for i := 1; i <= n; i++ {
		svc := service(fmt.Sprintf("%08d-0000-0000-0000-00000000000f", i), fmt.Sprintf("svc-%d", i), nil)
		if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, nil); err != nil {
			t.Fatal(err)
		}
	}
	st1, _ := e.srv.Client().Stats(ctx)
	const pipType = "Microsoft.Network/publicIPAddresses"
	gets := st1.Sum("GET", pipType, 0) - st0.Sum("GET", pipType, 0)
	notFound := st1.Sum("GET", pipType, 404) - st0.Sum("GET", pipType, 404)
	puts := st1.Sum("PUT", pipType, 0) - st0.Sum("PUT", pipType, 0)
	if notFound != 0 || puts != n {
		t.Errorf("%d services: %d public IP PUTs, %d GETs of which %d 404; want %d PUTs and no 404", n, puts, gets, notFound, n)
	}
	t.Logf("%d new services: %d public IP PUTs, %d GETs (list pages and operation polls included)", n, puts, gets)
}
