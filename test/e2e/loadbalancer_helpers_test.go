package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/azure-ccm/azure-ccm/internal/azsim/client"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	"github.com/azure-ccm/azure-ccm/test/framework"
	"github.com/azure-ccm/azure-ccm/test/framework/azurenames"
)

// The cluster name the CCM runs with (its --cluster-name default): the public LB's name.
const lbCluster = "kubernetes"

// lbWait bounds every wait for a reconcile; generous because the 2-core CI machine runs the
// cluster, azsim and the CCM at once.
const lbWait = 90 * time.Second

// lbEnv is a cluster with azsim, the CCM and initialized nodes, plus an ARM client to look at
// (and seed) azsim the way the CCM sees it.
type lbEnv struct {
	*framework.Env
	t   *testing.T
	net *armnetwork.ClientFactory
	rg  string
	ns  string
}

type lbOptions struct {
	Topology    *topology.Topology
	CloudConfig map[string]any
	CCMArgs     []string
	// DualStack gives the cluster and azsim both families (framework.DualStack).
	DualStack bool
	// BeforeCCM runs once the cluster is up, before the nodes and the CCM start.
	BeforeCCM func(*framework.Env)
	// ClusterArgs are extra component flags of the cluster (framework.Options.ClusterExtraArgs).
	ClusterArgs []string
}

// lbTopology is the default estate plus what the LB groups need: a second node-VNet subnet for
// the internal-subnet annotation and a resource group for public IPs elsewhere.
func lbTopology() *topology.Topology {
	t := framework.DefaultTopology()
	t.ResourceGroups = append(t.ResourceGroups, "rg-pips")
	t.VirtualNetworks[0].Subnets = append(t.VirtualNetworks[0].Subnets,
		topology.Subnet{Name: "ilb", AddressPrefix: "10.240.16.0/24"})
	return t
}

// lbNodeIPConfig selects the nodeIP backend: pool members are node addresses written through
// the backendAddressPools API.
var lbNodeIPConfig = map[string]any{"loadBalancerBackendPoolConfigurationType": "nodeIP"}

func lbStart(t *testing.T, o lbOptions) *lbEnv {
	t.Helper()
	topo := o.Topology
	if topo == nil {
		topo = lbTopology()
	}
	nodesRequireBinary(t, framework.CCMBinaryName)
	fo := framework.Options{Topology: topo, CloudConfig: o.CloudConfig}
	if o.DualStack {
		fo = framework.DualStack(fo)
	}
	fo.ClusterExtraArgs = append(fo.ClusterExtraArgs, o.ClusterArgs...)
	e := framework.Start(t, fo)
	if o.BeforeCCM != nil {
		o.BeforeCCM(e)
	}
	e.CreateNodes(framework.NodeOptions{ProviderID: true}, e.Machines...)
	e.StartCCM(o.CCMArgs...)
	for _, m := range e.Machines {
		e.WaitFor("node "+m.NodeName+" initialized", e.NodeInitialized(m.NodeName), lbWait)
	}
	f, err := lbARMClient(e.Azure)
	if err != nil {
		t.Fatal(err)
	}
	return &lbEnv{Env: e, t: t, net: f, rg: e.Azure.ResourceGroup, ns: "default"}
}

// lbARMClient is an SDK client factory logged in to azsim as the CCM's service principal.
func lbARMClient(a *framework.Azure) (*armnetwork.ClientFactory, error) {
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
	return armnetwork.NewClientFactory(a.SubscriptionID, cred, &arm.ClientOptions{ClientOptions: opts})
}

// with is l for a subtest: failures go to t (the framework's own waits fail the parent test,
// which a subtest must not do).
func (l *lbEnv) with(t *testing.T) *lbEnv {
	c := *l
	c.t = t
	return &c
}

// waitFor waits for cond and fails l's test if it never holds.
func (l *lbEnv) waitFor(what string, cond framework.Condition, timeout time.Duration) {
	l.t.Helper()
	began := time.Now()
	if err := l.Eventually(cond, timeout); err != nil {
		l.t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
	}
	l.t.Logf("%s after %s", what, time.Since(began).Round(time.Millisecond))
}

func lbCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// --- services -------------------------------------------------------------------------------

func lbTCP(port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: fmt.Sprintf("tcp-%d", port), Port: port, Protocol: corev1.ProtocolTCP,
		TargetPort: intstr.FromInt32(8080)}
}

func lbUDP(port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: fmt.Sprintf("udp-%d", port), Port: port, Protocol: corev1.ProtocolUDP,
		TargetPort: intstr.FromInt32(8080)}
}

func lbService(name string, ann map[string]string, ports ...corev1.ServicePort) *corev1.Service {
	if len(ports) == 0 {
		ports = []corev1.ServicePort{lbTCP(80)}
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: ann},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: ports,
			Selector: map[string]string{"app": name}},
	}
}

func (l *lbEnv) create(svc *corev1.Service) *corev1.Service {
	l.t.Helper()
	out, err := l.Kube.CoreV1().Services(svc.Namespace).Create(lbCtx(l.t), svc, metav1.CreateOptions{})
	if err != nil {
		l.t.Fatalf("create service %s: %v", svc.Name, err)
	}
	return out
}

// update re-reads the service, applies f and writes it (retrying on conflicts).
func (l *lbEnv) update(name string, f func(*corev1.Service)) *corev1.Service {
	l.t.Helper()
	var out *corev1.Service
	err := l.Eventually(func(ctx context.Context) (bool, error) {
		s, err := l.Kube.CoreV1().Services(l.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		f(s)
		out, err = l.Kube.CoreV1().Services(l.ns).Update(ctx, s, metav1.UpdateOptions{})
		return err == nil, err
	}, 30*time.Second)
	if err != nil {
		l.t.Fatalf("update service %s: %v", name, err)
	}
	return out
}

func (l *lbEnv) get(name string) *corev1.Service {
	l.t.Helper()
	s, err := l.Kube.CoreV1().Services(l.ns).Get(lbCtx(l.t), name, metav1.GetOptions{})
	if err != nil {
		l.t.Fatalf("get service %s: %v", name, err)
	}
	return s
}

// waitIP waits for the service's ingress IPs and returns the service as it then is.
func (l *lbEnv) waitIP(name string) *corev1.Service {
	l.t.Helper()
	l.waitFor("service "+name+" ingress IP", l.ServiceIngress(l.ns, name), lbWait)
	return l.get(name)
}

func ingressIPs(s *corev1.Service) []string {
	var out []string
	for _, in := range s.Status.LoadBalancer.Ingress {
		out = append(out, in.IP)
	}
	return out
}

// deleteAndWaitGone deletes the service and waits until azsim holds nothing of it: no frontend,
// rule or probe with its name on either LB, no public IP tagged with it or named after it, no
// NSG rule with its IPs as destinations.
func (l *lbEnv) deleteAndWaitGone(s *corev1.Service) {
	l.t.Helper()
	ips := ingressIPs(s)
	if err := l.Kube.CoreV1().Services(s.Namespace).Delete(lbCtx(l.t), s.Name, metav1.DeleteOptions{}); err != nil {
		l.t.Fatalf("delete service %s: %v", s.Name, err)
	}
	svcLB := azurenames.ServiceLBName(s.UID)
	key := azurenames.ServiceKey(s.Namespace, s.Name)
	l.waitFor("nothing of "+s.Name+" left in azsim", func(ctx context.Context) (bool, error) {
		st, err := l.state(ctx)
		if err != nil {
			return false, err
		}
		for _, lb := range st.LBs {
			if o := lbObjectsOf(lb, svcLB); len(o) > 0 {
				return false, fmt.Errorf("LB %s still has %v", *lb.Name, o)
			}
		}
		for _, p := range st.PIPs {
			v, _ := azurenames.ServiceTagValue(p.Tags)
			if strings.Contains(*p.Name, svcLB) || slices.Contains(azurenames.ParseServiceTag(v), key) {
				return false, fmt.Errorf("public IP %s (tags %s) is left", *p.Name, v)
			}
		}
		for _, ip := range ips {
			if rs := nsgRulesTo(st.NSG, ip); len(rs) > 0 {
				return false, fmt.Errorf("NSG rules %v still target %s", rs, ip)
			}
		}
		return true, nil
	}, lbWait)
}

// --- azsim state ----------------------------------------------------------------------------

// azState is what azsim holds of the cluster's load balancing.
type azState struct {
	LBs  map[string]*armnetwork.LoadBalancer // by name; absent = does not exist
	NSG  *armnetwork.SecurityGroup
	PIPs map[string]*armnetwork.PublicIPAddress // by "<rg>/<name>", every RG of the topology
	// NodeIPs are the nodes' addresses (filled by tests that need them in checks).
	NodeIPs []string
}

func (l *lbEnv) state(ctx context.Context) (*azState, error) {
	st := &azState{LBs: map[string]*armnetwork.LoadBalancer{}, PIPs: map[string]*armnetwork.PublicIPAddress{}}
	pager := l.net.NewLoadBalancersClient().NewListPager(l.rg, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, lb := range page.Value {
			st.LBs[*lb.Name] = lb
		}
	}
	nsg, err := l.net.NewSecurityGroupsClient().Get(ctx, l.rg, l.Azure.SecurityGroupName, nil)
	if err != nil {
		return nil, err
	}
	st.NSG = &nsg.SecurityGroup
	for _, rg := range []string{l.rg, "rg-pips"} {
		pp := l.net.NewPublicIPAddressesClient().NewListPager(rg, nil)
		for pp.More() {
			page, err := pp.NextPage(ctx)
			if err != nil {
				return nil, err
			}
			for _, p := range page.Value {
				st.PIPs[rg+"/"+*p.Name] = p
			}
		}
	}
	return st, nil
}

func (l *lbEnv) mustState() *azState {
	l.t.Helper()
	st, err := l.state(lbCtx(l.t))
	if err != nil {
		l.t.Fatalf("reading azsim: %v", err)
	}
	return st
}

// svcView is one service's objects on one LB, by name.
type svcView struct {
	Frontends map[string]*armnetwork.FrontendIPConfiguration
	Rules     map[string]*armnetwork.LoadBalancingRule
	Probes    map[string]*armnetwork.Probe
}

func (v svcView) names() (fes, rules, probes []string) {
	return sortedKeys(v.Frontends), sortedKeys(v.Rules), sortedKeys(v.Probes)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// view collects the frontends, rules and probes whose names carry the service's LB name.
func view(lb *armnetwork.LoadBalancer, svcLB string) svcView {
	v := svcView{Frontends: map[string]*armnetwork.FrontendIPConfiguration{},
		Rules: map[string]*armnetwork.LoadBalancingRule{}, Probes: map[string]*armnetwork.Probe{}}
	if lb == nil || lb.Properties == nil {
		return v
	}
	for _, f := range lb.Properties.FrontendIPConfigurations {
		if azurenames.OwnedByService(svcLB, *f.Name) {
			v.Frontends[*f.Name] = f
		}
	}
	for _, r := range lb.Properties.LoadBalancingRules {
		if azurenames.OwnedByService(svcLB, *r.Name) {
			v.Rules[*r.Name] = r
		}
	}
	for _, p := range lb.Properties.Probes {
		if azurenames.OwnedByService(svcLB, *p.Name) {
			v.Probes[*p.Name] = p
		}
	}
	return v
}

func lbObjectsOf(lb *armnetwork.LoadBalancer, svcLB string) []string {
	fes, rules, probes := view(lb, svcLB).names()
	return append(append(fes, rules...), probes...)
}

// nsgRulesTo names the managed NSG rules with ip among their destinations.
func nsgRulesTo(nsg *armnetwork.SecurityGroup, ip string) []string {
	var out []string
	for _, r := range nsg.Properties.SecurityRules {
		if slices.Contains(ruleDestinations(r), ip) {
			out = append(out, *r.Name)
		}
	}
	sort.Strings(out)
	return out
}

func nsgRule(nsg *armnetwork.SecurityGroup, name string) *armnetwork.SecurityRule {
	for _, r := range nsg.Properties.SecurityRules {
		if *r.Name == name {
			return r
		}
	}
	return nil
}

func ruleDestinations(r *armnetwork.SecurityRule) []string {
	return prefixes(r.Properties.DestinationAddressPrefix, r.Properties.DestinationAddressPrefixes)
}

func ruleSources(r *armnetwork.SecurityRule) []string {
	return prefixes(r.Properties.SourceAddressPrefix, r.Properties.SourceAddressPrefixes)
}

func rulePorts(r *armnetwork.SecurityRule) []string {
	return prefixes(r.Properties.DestinationPortRange, r.Properties.DestinationPortRanges)
}

func prefixes(one *string, many []*string) []string {
	var out []string
	if one != nil && *one != "" {
		out = append(out, *one)
	}
	for _, p := range many {
		out = append(out, *p)
	}
	sort.Strings(out)
	return out
}

// poolIPs are the addresses in a nodeIP backend pool of lb.
func poolIPs(lb *armnetwork.LoadBalancer, pool string) []string {
	var out []string
	if lb == nil || lb.Properties == nil {
		return nil
	}
	for _, p := range lb.Properties.BackendAddressPools {
		if *p.Name != pool || p.Properties == nil {
			continue
		}
		for _, a := range p.Properties.LoadBalancerBackendAddresses {
			if a.Properties != nil && a.Properties.IPAddress != nil {
				out = append(out, *a.Properties.IPAddress)
			}
		}
	}
	sort.Strings(out)
	return out
}

// nodeIPs are the first internal IPs of the environment's machines, sorted.
func (l *lbEnv) nodeIPs(except ...string) []string {
	var out []string
	for _, m := range l.Machines {
		if !slices.Contains(except, m.NodeName) {
			out = append(out, m.InternalIPs[0])
		}
	}
	sort.Strings(out)
	return out
}

// canon is a resource's JSON without etags and provisioning states (which change with every
// write of the parent) and the given keys (read-only back references such as a frontend's
// loadBalancingRules), to compare what a change really touched.
func canon(t *testing.T, v any, drop ...string) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var strip func(any) any
	strip = func(x any) any {
		switch x := x.(type) {
		case map[string]any:
			delete(x, "etag")
			delete(x, "provisioningState")
			for _, k := range drop {
				delete(x, k)
			}
			for k, v := range x {
				x[k] = strip(v)
			}
		case []any:
			for i := range x {
				x[i] = strip(x[i])
			}
		}
		return x
	}
	out, _ := json.Marshal(strip(m))
	return string(out)
}

// --- ARM counters -------------------------------------------------------------------------

func (l *lbEnv) stats() client.Stats {
	l.t.Helper()
	s, err := l.Azsim.Stats(lbCtx(l.t))
	if err != nil {
		l.t.Fatalf("azsim stats: %v", err)
	}
	return s
}

// armWrites counts PUT/PATCH/DELETE/POST requests on network resources.
func armWrites(s client.Stats) int64 {
	var n int64
	for _, typ := range []string{"loadBalancers", "backendAddressPools", "networkSecurityGroups", "publicIPAddresses"} {
		n += s.Writes(typ) + s.Deletes(typ) + s.Actions(typ)
	}
	return n
}

// warningEvents are the Warning events recorded on the service.
func (l *lbEnv) warningEvents(ctx context.Context, name string) ([]corev1.Event, error) {
	evs, err := l.Kube.CoreV1().Events(l.ns).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Service,involvedObject.name=" + name})
	if err != nil {
		return nil, err
	}
	var out []corev1.Event
	for _, e := range evs.Items {
		if e.Type == corev1.EventTypeWarning {
			out = append(out, e)
		}
	}
	return out, nil
}

// pipAddress is the address of a public IP.
func pipAddress(p *armnetwork.PublicIPAddress) string {
	if p == nil || p.Properties == nil || p.Properties.IPAddress == nil {
		return ""
	}
	return *p.Properties.IPAddress
}

func strs(ps []*string) []string {
	var out []string
	for _, p := range ps {
		out = append(out, *p)
	}
	sort.Strings(out)
	return out
}

func isIPv4(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Is4()
}

var deleteOpts = metav1.DeleteOptions{}

var updateOpts = metav1.UpdateOptions{}
