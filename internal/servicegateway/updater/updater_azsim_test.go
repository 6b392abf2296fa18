package updater

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azsim/client"
	"github.com/azure-ccm/azure-ccm/internal/azsim/server"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	dt "github.com/azure-ccm/azure-ccm/internal/servicegateway/difftracker"
	"github.com/azure-ccm/azure-ccm/internal/testutil"
)

const testRG = "rg-cluster"

type env struct {
	t     *testing.T
	ctx   context.Context
	srv   *server.Server
	net   *armnetwork.ClientFactory
	azure *Azure

	mu      sync.Mutex
	ready   map[string]string
	removed []string
	writes  *writeLog
}

// writeLog is the clients' transport; it records the preconditions of every PUT and DELETE
// as sent (after the pipeline added the headers of the call's context).
type writeLog struct {
	next policy.Transporter
	mu   sync.Mutex
	reqs []string // "PUT <path> If-Match=<v> If-None-Match=<v>"
}

func (l *writeLog) Do(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPut || r.Method == http.MethodDelete {
		l.mu.Lock()
		l.reqs = append(l.reqs, fmt.Sprintf("%s %s If-Match=%s If-None-Match=%s", r.Method, r.URL.Path, r.Header.Get("If-Match"), r.Header.Get("If-None-Match")))
		l.mu.Unlock()
	}
	return l.next.Do(r)
}

func (l *writeLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.reqs
	l.reqs = nil
	return out
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	srv, err := server.Start(ctx, server.Options{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = srv.Close() })
	writes := &writeLog{next: srv.HTTPClient()}
	if _, err := srv.Seed(ctx, &topology.Topology{ResourceGroups: []string{testRG},
		VirtualNetworks: []topology.VirtualNetwork{{ResourceGroup: testRG, Name: "vnet", AddressPrefixes: []string{"10.0.0.0/8"},
			Subnets: []topology.Subnet{{Name: "subnet", AddressPrefix: "10.240.0.0/16"}}}}}); err != nil {
		t.Fatal(err)
	}
	opts := azcore.ClientOptions{
		Cloud: cloud.Configuration{ActiveDirectoryAuthorityHost: srv.URL() + "/",
			Services: map[cloud.ServiceName]cloud.ServiceConfiguration{cloud.ResourceManager: {Endpoint: srv.URL(), Audience: "https://management.azure.com/"}}},
		Transport: writes,
		// Failures reach the updater, whose retries are under test.
		Retry: policy.RetryOptions{MaxRetries: -1},
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
	scope := Scope{SubscriptionID: topology.DefaultSubscriptionID, ResourceGroup: testRG, Location: topology.DefaultLocation, ClusterName: "kubernetes",
		VNetID: "/subscriptions/" + topology.DefaultSubscriptionID + "/resourceGroups/" + testRG + "/providers/Microsoft.Network/virtualNetworks/vnet"}
	p, err := f.NewServiceGatewaysClient().BeginCreateOrUpdate(ctx, testRG, GatewayName, armnetwork.ServiceGateway{Location: to.Ptr(scope.Location),
		Properties: &armnetwork.ServiceGatewayPropertiesFormat{VirtualNetwork: &armnetwork.VirtualNetwork{ID: to.Ptr(scope.VNetID)}}}, nil)
	if err == nil {
		_, err = p.PollUntilDone(ctx, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, ctx: ctx, srv: srv, net: f, azure: &Azure{Scope: scope, Network: f, PollFrequency: 20 * time.Millisecond}, ready: map[string]string{}, writes: writes}
}

func (v *env) updater() *Updater {
	return New(Options{Azure: v.azure, Gather: time.Millisecond, MinBackoff: 10 * time.Millisecond, Callbacks: Callbacks{
		InboundReady: func(name, ip string) { v.mu.Lock(); v.ready[name] = ip; v.mu.Unlock() },
		Removed:      func(name string, _ dt.Kind) { v.mu.Lock(); v.removed = append(v.removed, name); v.mu.Unlock() },
	}})
}

// gateway reads the gateway: services (name=type) and locations (node → "pod=svc,svc").
func (v *env) gateway() (svcs []string, locs map[string][]string) {
	v.t.Helper()
	st, err := v.azure.ReadGateway(v.ctx)
	if err != nil {
		v.t.Fatal(err)
	}
	for _, s := range st.Services {
		svcs = append(svcs, *s.Name+"="+string(*s.Properties.ServiceType))
	}
	sort.Strings(svcs)
	locs = map[string][]string{}
	for n, addrs := range st.Locations {
		for a, s := range addrs {
			locs[n] = append(locs[n], a+"="+strings.Join(s, ","))
		}
		sort.Strings(locs[n])
	}
	return svcs, locs
}

func (v *env) posts() int64 {
	st, err := v.srv.Client().Stats(v.ctx)
	if err != nil {
		v.t.Fatal(err)
	}
	var n int64
	for _, c := range st.Requests {
		if c.Method == http.MethodPost {
			n += c.Count
		}
	}
	return n
}

func (v *env) exists(id string) bool {
	_, err := v.srv.Client().Get(v.ctx, id)
	return err == nil
}

func TestUpdaterLifecycle(t *testing.T) {
	v := newEnv(t)
	u := v.updater()
	if err := u.Bootstrap(v.ctx); err != nil {
		t.Fatal(err)
	}
	spec := InboundSpec{Ports: []Port{{Protocol: "Tcp", FrontendPort: 80, BackendPort: 8080}}, IdleTimeoutMinutes: 4}
	u.SetInbound("uid-a", spec, map[string]string{"10.244.0.5": "10.240.0.4", "10.244.0.6": "10.240.0.4", "10.244.1.5": "10.240.0.5"})
	u.SetEgress("egress1", map[string]string{"10.244.0.5": "10.240.0.4"})
	before := v.posts()
	if err := u.Sync(v.ctx); err != nil {
		t.Fatal(err)
	}
	// One registration call for both services, one address call for both.
	if n := v.posts() - before; n != 2 {
		t.Fatalf("first pass made %d gateway calls, want 2", n)
	}
	svcs, locs := v.gateway()
	if !slices.Equal(svcs, []string{"egress1=Outbound", "uid-a=Inbound"}) {
		t.Fatalf("services = %v", svcs)
	}
	want := map[string][]string{"10.240.0.4": {"10.244.0.5=egress1,uid-a", "10.244.0.6=uid-a"}, "10.240.0.5": {"10.244.1.5=uid-a"}}
	if !equalLocs(locs, want) {
		t.Fatalf("locations = %v", locs)
	}
	lb, err := v.net.NewLoadBalancersClient().Get(v.ctx, testRG, "uid-a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if *lb.SKU.Name != LBSKUService || len(lb.Properties.LoadBalancingRules) != 1 || *lb.Properties.LoadBalancingRules[0].Name != "rule-tcp-80" {
		t.Fatalf("load balancer = %+v", lb.LoadBalancer)
	}
	nat, err := v.net.NewNatGatewaysClient().Get(v.ctx, testRG, "egress1", nil)
	if err != nil || !strings.EqualFold(*nat.Properties.ServiceGateway.ID, v.azure.Scope.GatewayID()) {
		t.Fatalf("NAT gateway: %v %+v", err, nat)
	}
	if v.ready["uid-a"] == "" || v.ready["egress1"] != "" {
		t.Fatalf("ready callbacks = %v", v.ready)
	}
	if !u.InSync() {
		t.Fatal("not in sync after a successful pass")
	}
	// Steady state: no call at all.
	before = v.posts()
	if err := u.Sync(v.ctx); err != nil || v.posts() != before {
		t.Fatalf("steady pass: err %v, calls %d", err, v.posts()-before)
	}

	// A pod moves; the address call fails twice (injected 500): the update is kept and sent.
	fault, err := v.srv.Client().AddFault(v.ctx, client.Fault{Kind: "error", Status: 500, PathContains: "updateAddressLocations", Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	_ = fault
	u.SetInbound("uid-a", spec, map[string]string{"10.244.0.5": "10.240.0.4", "10.244.2.7": "10.240.0.6", "10.244.1.5": "10.240.0.5"})
	for i := 0; i < 2; i++ {
		if err := u.Sync(v.ctx); err == nil {
			t.Fatalf("pass %d succeeded through an injected fault", i)
		}
	}
	if err := u.Sync(v.ctx); err != nil {
		t.Fatal(err)
	}
	_, locs = v.gateway()
	want = map[string][]string{"10.240.0.4": {"10.244.0.5=egress1,uid-a"}, "10.240.0.5": {"10.244.1.5=uid-a"}, "10.240.0.6": {"10.244.2.7=uid-a"}}
	if !equalLocs(locs, want) {
		t.Fatalf("after move = %v", locs)
	}

	// A port change rewrites the load balancer only (no gateway call).
	spec2 := spec
	spec2.Ports = append(spec2.Ports, Port{Protocol: "Udp", FrontendPort: 53, BackendPort: 5353})
	u.SetInbound("uid-a", spec2, map[string]string{"10.244.0.5": "10.240.0.4", "10.244.2.7": "10.240.0.6", "10.244.1.5": "10.240.0.5"})
	before = v.posts()
	if err := u.Sync(v.ctx); err != nil || v.posts() != before {
		t.Fatalf("port change: err %v, gateway calls %d", err, v.posts()-before)
	}
	lb, _ = v.net.NewLoadBalancersClient().Get(v.ctx, testRG, "uid-a", nil)
	if len(lb.Properties.LoadBalancingRules) != 2 {
		t.Fatalf("rules after port change: %d", len(lb.Properties.LoadBalancingRules))
	}

	// A restart (new updater from Azure) sees nothing to do.
	u2 := v.updater()
	if err := u2.Bootstrap(v.ctx); err != nil {
		t.Fatal(err)
	}
	u2.SetInbound("uid-a", spec2, map[string]string{"10.244.0.5": "10.240.0.4", "10.244.2.7": "10.240.0.6", "10.244.1.5": "10.240.0.5"})
	u2.SetEgress("egress1", map[string]string{"10.244.0.5": "10.240.0.4"})
	if got := u2.Tracker().ToRegister(); len(got) != 0 {
		t.Fatalf("after restart, to register: %v", got)
	}
	if d := u2.Tracker().LocationsDiff(); !d.Empty() {
		t.Fatalf("after restart, locations diff: %+v", d)
	}

	// Delete both: addresses first, then registrations and resources.
	u2.DeleteInbound("uid-a")
	u2.SetEgress("egress1", nil)
	if err := u2.Sync(v.ctx); err != nil {
		t.Fatal(err)
	}
	svcs, locs = v.gateway()
	if len(svcs) != 0 || len(locs) != 0 {
		t.Fatalf("after delete: services %v locations %v", svcs, locs)
	}
	sc := v.azure.Scope
	for _, id := range []string{sc.LBID("uid-a"), sc.PIPID("uid-a"), sc.NATID("egress1"), sc.PIPID("egress1")} {
		if v.exists(id) {
			t.Errorf("%s still exists", id)
		}
	}
	if !u2.InSync() {
		t.Fatal("not in sync after delete")
	}
}

func TestUpdaterOrphansAndUnregisteredDelete(t *testing.T) {
	v := newEnv(t)
	u := v.updater()
	if err := u.Bootstrap(v.ctx); err != nil {
		t.Fatal(err)
	}
	// Resources written, registration fails: deleting the service still removes them.
	if _, err := v.srv.Client().AddFault(v.ctx, client.Fault{Kind: "error", Status: 500, PathContains: "updateServices", Count: 1}); err != nil {
		t.Fatal(err)
	}
	spec := InboundSpec{Ports: []Port{{Protocol: "Tcp", FrontendPort: 80, BackendPort: 80}}, IdleTimeoutMinutes: 4}
	u.SetInbound("uid-b", spec, map[string]string{"10.244.0.5": "10.240.0.4"})
	u.SetInbound("uid-c", spec, nil)
	if err := u.Sync(v.ctx); err == nil {
		t.Fatal("registration fault not reported")
	}
	if !v.exists(v.azure.Scope.LBID("uid-b")) {
		t.Fatal("load balancer not written before registration")
	}
	u.DeleteInbound("uid-b")
	if err := u.Sync(v.ctx); err != nil {
		t.Fatal(err)
	}
	if v.exists(v.azure.Scope.LBID("uid-b")) || v.exists(v.azure.Scope.PIPID("uid-b")) || !slices.Contains(v.removed, "uid-b") {
		t.Fatalf("unregistered service's resources left behind (removed callbacks %v)", v.removed)
	}
	// An owned load balancer no registration accounts for (crash between write and register)
	// is an orphan after a restart; a user's load balancer is never touched.
	if _, err := v.azure.EnsurePIP(v.ctx, "uid-orphan", "Inbound", false); err != nil {
		t.Fatal(err)
	}
	if err := v.azure.EnsureLB(v.ctx, "uid-orphan", spec); err != nil {
		t.Fatal(err)
	}
	user := v.azure.Scope.LoadBalancer("users-lb", spec)
	user.Tags = nil
	user.Properties.LoadBalancingRules = nil
	user.Properties.FrontendIPConfigurations = nil
	p, err := v.net.NewLoadBalancersClient().BeginCreateOrUpdate(v.ctx, testRG, "users-lb", user, nil)
	if err == nil {
		_, err = p.PollUntilDone(v.ctx, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	u2 := v.updater()
	if err := u2.Bootstrap(v.ctx); err != nil {
		t.Fatal(err)
	}
	u2.SetInbound("uid-c", spec, nil)
	if err := u2.Sync(v.ctx); err != nil {
		t.Fatal(err)
	}
	if v.exists(v.azure.Scope.LBID("uid-orphan")) || v.exists(v.azure.Scope.PIPID("uid-orphan")) {
		t.Fatal("orphan load balancer kept")
	}
	if !v.exists(v.azure.Scope.LBID("users-lb")) || !v.exists(v.azure.Scope.LBID("uid-c")) {
		t.Fatal("a user's or a wanted load balancer was deleted")
	}
}

func TestRunRetriesUntilApplied(t *testing.T) {
	v := newEnv(t)
	u := v.updater()
	if err := u.Bootstrap(v.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := v.srv.Client().AddFault(v.ctx, client.Fault{Kind: "error", Status: 503, PathContains: "updateAddressLocations", Count: 3}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(v.ctx)
	defer cancel()
	go u.Run(ctx)
	spec := InboundSpec{Ports: []Port{{Protocol: "Tcp", FrontendPort: 80, BackendPort: 80}}, IdleTimeoutMinutes: 4}
	for i := 0; i < 5; i++ {
		u.SetInbound("uid-d", spec, map[string]string{"10.244.0.5": "10.240.0.4", "10.244.0.6": "10.240.0.4"})
	}
	testutil.Eventually(t, "the locations applied after retries", func() error {
		if _, locs := v.gateway(); !equalLocs(locs, map[string][]string{"10.240.0.4": {"10.244.0.5=uid-d", "10.244.0.6=uid-d"}}) {
			return fmt.Errorf("locations %v", locs)
		}
		return nil
	})
}

func equalLocs(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// TestDriftedMappingIsResynced: an address mapped to a service behind the updater's back
// blocks the unregistration (NRP refuses); the next pass resends the locations in full and
// the service goes.
func TestDriftedMappingIsResynced(t *testing.T) {
	v := newEnv(t)
	u := v.updater()
	if err := u.Bootstrap(v.ctx); err != nil {
		t.Fatal(err)
	}
	spec := InboundSpec{Ports: []Port{{Protocol: "Tcp", FrontendPort: 80, BackendPort: 80}}, IdleTimeoutMinutes: 4}
	u.SetInbound("uid-e", spec, map[string]string{"10.244.0.5": "10.240.0.4"})
	if err := u.Sync(v.ctx); err != nil {
		t.Fatal(err)
	}
	if err := v.azure.UpdateAddressLocations(v.ctx, dt.LocationsUpdate{Locations: []dt.Location{{Node: "10.240.0.9", Full: true,
		Addresses: []dt.Address{{IP: "10.244.9.9", Services: []string{"uid-e"}}}}}}); err != nil {
		t.Fatal(err)
	}
	u.DeleteInbound("uid-e")
	if err := u.Sync(v.ctx); err == nil || !strings.Contains(err.Error(), "ServiceWithOverlayMappingsCannotBeDeleted") {
		t.Fatalf("first pass: %v", err)
	}
	if err := u.Sync(v.ctx); err != nil {
		t.Fatal(err)
	}
	svcs, locs := v.gateway()
	if len(svcs) != 0 || len(locs) != 0 || v.exists(v.azure.Scope.LBID("uid-e")) {
		t.Fatalf("after resync: services %v locations %v", svcs, locs)
	}
}

// TestBurstBecomesFewCalls: changes arriving every 10 ms for half a second (a scale-up) are
// gathered into a few passes, not one call per change.
func TestBurstBecomesFewCalls(t *testing.T) {
	v := newEnv(t)
	u := New(Options{Azure: v.azure, Gather: 200 * time.Millisecond, MaxGather: 5 * time.Second, MinBackoff: 10 * time.Millisecond})
	if err := u.Bootstrap(v.ctx); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(v.ctx)
	defer cancel()
	go u.Run(ctx)
	before := v.posts()
	spec := InboundSpec{Ports: []Port{{Protocol: "Tcp", FrontendPort: 80, BackendPort: 80}}, IdleTimeoutMinutes: 4}
	members := map[string]string{}
	for i := 0; i < 50; i++ {
		members[fmt.Sprintf("10.244.0.%d", i+2)] = "10.240.0.4"
		u.SetInbound("uid-f", spec, maps.Clone(members))
		time.Sleep(10 * time.Millisecond) // the pace of the changes under test, not a wait for a result
	}
	testutil.WaitFor(t, "the updater in sync", u.InSync)
	// One registration and one or two address calls (a pass may start in a scheduling gap).
	if n := v.posts() - before; n > 4 {
		t.Fatalf("50 changes cost %d gateway calls", n)
	}
	_, locs := v.gateway()
	if len(locs["10.240.0.4"]) != 50 {
		t.Fatalf("addresses: %d", len(locs["10.240.0.4"]))
	}
}

// TestResourceWritesAreConditional: every PUT and DELETE of the updater's resources carries
// If-Match (or If-None-Match: * to create); a 412 is answered by re-reading and writing on top,
// keeping the tags someone else set; a resource of the same name that is not this cluster's is
// never overwritten, and one whose cluster tag was removed is not deleted.
func TestResourceWritesAreConditional(t *testing.T) {
	v := newEnv(t)
	u := v.updater()
	if err := u.Bootstrap(v.ctx); err != nil {
		t.Fatal(err)
	}
	v.writes.take()
	spec := InboundSpec{Ports: []Port{{Protocol: "Tcp", FrontendPort: 80, BackendPort: 80}}, IdleTimeoutMinutes: 4}
	u.SetInbound("uid-a", spec, map[string]string{"10.244.0.5": "10.240.0.4"})
	u.SetEgress("egress1", map[string]string{"10.244.0.6": "10.240.0.4"})
	if err := u.Sync(v.ctx); err != nil {
		t.Fatal(err)
	}

	// Someone else (a policy, an operator) tags the load balancer: its ETag changes.
	lbs := v.net.NewLoadBalancersClient()
	lb, err := lbs.Get(v.ctx, testRG, "uid-a", nil)
	if err != nil {
		t.Fatal(err)
	}
	lb.Tags["cost-center"] = to.Ptr("42")
	p, err := lbs.BeginCreateOrUpdate(v.ctx, testRG, "uid-a", lb.LoadBalancer, nil)
	if err == nil {
		_, err = p.PollUntilDone(v.ctx, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	v.writes.take()
	spec2 := spec
	spec2.Ports = append(spec2.Ports, Port{Protocol: "Tcp", FrontendPort: 443, BackendPort: 443})
	u.SetInbound("uid-a", spec2, map[string]string{"10.244.0.5": "10.240.0.4"})
	if err := u.Sync(v.ctx); err != nil {
		t.Fatal(err)
	}
	lb, err = lbs.Get(v.ctx, testRG, "uid-a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(lb.Properties.LoadBalancingRules) != 2 || lb.Tags["cost-center"] == nil || *lb.Tags["cost-center"] != "42" || *lb.Tags[TagCluster] != "kubernetes" {
		t.Fatalf("rewritten load balancer: %d rules, tags %v", len(lb.Properties.LoadBalancingRules), lb.Tags)
	}
	var lbPuts []string
	for _, w := range v.writes.take() {
		if strings.HasPrefix(w, "PUT") && strings.Contains(w, "/loadBalancers/uid-a ") {
			lbPuts = append(lbPuts, w)
		}
	}
	// The first PUT carries the stale ETag and gets 412; the second the re-read one.
	if len(lbPuts) != 2 || strings.Contains(lbPuts[0], "If-Match= ") || strings.Contains(lbPuts[1], "If-Match= ") {
		t.Fatalf("load balancer PUTs after a foreign change: %q", lbPuts)
	}

	// A public IP of the same name that is not this cluster's is never overwritten.
	pips := v.net.NewPublicIPAddressesClient()
	users := v.azure.Scope.PublicIP("uid-users", "Inbound", false)
	users.Tags = map[string]*string{"owner": to.Ptr("someone")}
	pp, err := pips.BeginCreateOrUpdate(v.ctx, testRG, PIPName("uid-users"), users, nil)
	if err == nil {
		_, err = pp.PollUntilDone(v.ctx, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.azure.EnsurePIP(v.ctx, "uid-users", "Inbound", false); err == nil || !strings.Contains(err.Error(), "not this cluster's") {
		t.Fatalf("writing over a user's public IP: %v", err)
	}
	got, err := pips.Get(v.ctx, testRG, PIPName("uid-users"), nil)
	if err != nil || got.Tags[TagCluster] != nil || *got.Tags["owner"] != "someone" {
		t.Fatalf("user's public IP changed: %v %v", err, got.Tags)
	}

	// The egress identity's NAT gateway and public IP lose their cluster tag (someone adopts
	// them): deleting the identity leaves them alone.
	nats := v.net.NewNatGatewaysClient()
	nat, err := nats.Get(v.ctx, testRG, "egress1", nil)
	if err != nil {
		t.Fatal(err)
	}
	delete(nat.Tags, TagCluster)
	np, err := nats.BeginCreateOrUpdate(v.ctx, testRG, "egress1", nat.NatGateway, nil)
	if err == nil {
		_, err = np.PollUntilDone(v.ctx, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	pip, err := pips.Get(v.ctx, testRG, PIPName("egress1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	delete(pip.Tags, TagCluster)
	if pp, err = pips.BeginCreateOrUpdate(v.ctx, testRG, PIPName("egress1"), pip.PublicIPAddress, nil); err == nil {
		_, err = pp.PollUntilDone(v.ctx, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	v.writes.take()
	u.SetEgress("egress1", nil)
	u.DeleteInbound("uid-a")
	if err := u.Sync(v.ctx); err != nil {
		t.Fatal(err)
	}
	sc := v.azure.Scope
	if !v.exists(sc.NATID("egress1")) || !v.exists(sc.PIPID("egress1")) {
		t.Fatal("a NAT gateway or public IP that is no longer the cluster's was deleted")
	}
	for _, id := range []string{sc.LBID("uid-a"), sc.PIPID("uid-a")} {
		if v.exists(id) {
			t.Errorf("%s still exists", id)
		}
	}
	// Every write of the updater was conditional.
	ws := v.writes.take()
	if len(ws) < 2 {
		t.Fatalf("deletes sent: %q", ws)
	}
	for _, w := range ws {
		if strings.Contains(w, "If-Match= If-None-Match= ") || strings.HasSuffix(w, "If-Match= If-None-Match=") {
			t.Errorf("unconditional write: %s", w)
		}
	}
}
