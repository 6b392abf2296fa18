package writeplan

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	cloudprovider "k8s.io/cloud-provider"
	servicehelper "k8s.io/cloud-provider/service/helpers"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/drift"
	"github.com/azure-ccm/azure-ccm/internal/azsim/server"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	"github.com/azure-ccm/azure-ccm/internal/azureid"
	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/dryrun"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
	"github.com/azure-ccm/azure-ccm/internal/provider"
)

const cluster = "kubernetes"

type planEnv struct {
	sim   *server.Server
	cloud *provider.Cloud
	kube  *fake.Clientset
	lb    *loadbalancer.LoadBalancer
	sub   string
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func startPlanEnv(t *testing.T) *planEnv {
	t.Helper()
	ctx := ctxT(t)
	sim, err := server.Start(context.Background(), server.Options{IMDSAddr: "off"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	res, err := sim.Seed(ctx, &topology.Topology{
		Location:       "eastus",
		ResourceGroups: []string{"rg"},
		VirtualNetworks: []topology.VirtualNetwork{{ResourceGroup: "rg", Name: "vnet", AddressPrefixes: []string{"10.0.0.0/8"},
			Subnets: []topology.Subnet{{Name: "nodes", AddressPrefix: "10.240.0.0/16"}}}},
		NetworkSecurityGroups: []topology.Named{{ResourceGroup: "rg", Name: "nsg"}},
		RouteTables:           []topology.Named{{ResourceGroup: "rg", Name: "rt"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfgJSON := fmt.Sprintf(`{"cloud":"AzureStackCloud","disableAzureStackCloud":true,"tenantId":%q,"subscriptionId":%q,
		"aadClientId":%q,"aadClientSecret":%q,"resourceGroup":"rg","location":"eastus","vnetName":"vnet","subnetName":"nodes",
		"securityGroupName":"nsg","routeTableName":"rt","vmType":"standard","loadBalancerSku":"standard",
		"loadBalancerBackendPoolConfigurationType":"nodeIP"}`,
		server.DefaultTenantID, res.SubscriptionID, server.DefaultClientID, server.DefaultClientSecret)
	cfg, err := config.Parse([]byte(cfgJSON), nil)
	if err != nil {
		t.Fatal(err)
	}
	env, err := config.ResolveEnvironment(ctx, cfg, sim.LookupEnvironmentFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	cloud, err := provider.New(ctx, cfg, provider.Options{
		ARM: arm.Options{Transport: sim.HTTPClient(), Environment: &env, Metrics: arm.NewMetrics(), PollFrequency: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	parts, err := loadbalancer.Build(loadbalancer.BuildOptions{Config: cfg, Writers: cloud.Writers, PublicIPs: cloud.Clients.Caches.NetworkPublicIPs,
		PrivateLinks: cloud.Clients.Caches.PrivateLinkServices,
		Recorder:     dryrun.Discard{}, Nodes: cloud.Resolver, Caches: cloud.Clients.Caches})
	if err != nil {
		t.Fatal(err)
	}
	return &planEnv{sim: sim, cloud: cloud, kube: fake.NewClientset(), lb: parts.LoadBalancer, sub: res.SubscriptionID}
}

func lbService(name, uid string, ann map[string]string) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(uid), Annotations: ann,
			Finalizers: []string{servicehelper.LoadBalancerCleanupFinalizer}},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Name: "http", Port: 80, NodePort: 30080, Protocol: v1.ProtocolTCP}}},
	}
}

func kubeNode(name, ip, podCIDR string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:   v1.NodeSpec{PodCIDRs: []string{podCIDR}, PodCIDR: podCIDR},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}}}}
}

func (e *planEnv) add(t *testing.T, objs ...any) {
	t.Helper()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *v1.Service:
			_, err = e.kube.CoreV1().Services(o.Namespace).Create(ctxT(t), o, metav1.CreateOptions{})
		case *v1.Node:
			_, err = e.kube.CoreV1().Nodes().Create(ctxT(t), o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func (e *planEnv) writes() int64 {
	var n int64
	for _, c := range e.sim.Middleware().Stats().Requests {
		if c.Method != "GET" {
			n += c.Count
		}
	}
	return n
}

func (e *planEnv) plan(t *testing.T) (*Plan, string) {
	t.Helper()
	// A fresh view of Azure, as a plan run in a new process has.
	e.cloud.Writers.LoadBalancers.InvalidateAll()
	e.cloud.Writers.SecurityGroups.InvalidateAll()
	e.cloud.Writers.RouteTables.InvalidateAll()
	e.cloud.Clients.Caches.InvalidateAll()
	before := e.writes()
	p, err := Run(ctxT(t), Options{Cloud: e.cloud, ClusterName: cluster, Kube: e.kube, Services: true, AdminState: true,
		Routes: true, ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}})
	if err != nil {
		t.Fatal(err)
	}
	if n := e.writes() - before; n != 0 {
		t.Fatalf("the plan wrote %d times to Azure", n)
	}
	var b bytes.Buffer
	if err := p.Text(&b); err != nil {
		t.Fatal(err)
	}
	return p, b.String()
}

// lines are the change lines of the plan's text (indented), for exact comparisons.
func lines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "    ") && !strings.HasPrefix(l, "    id: ") {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

func TestPlan(t *testing.T) {
	e := startPlanEnv(t)
	web := lbService("web", "11111111-0000-0000-0000-000000000001", nil)
	n1, n2 := kubeNode("n1", "10.240.0.4", "10.244.1.0/24"), kubeNode("n2", "10.240.0.5", "10.244.2.0/24")
	e.add(t, web, n1, n2)
	// Converged by the CCM: the service and the routes.
	st, err := e.lb.EnsureLoadBalancer(ctxT(t), cluster, web, []*v1.Node{n1, n2})
	if err != nil {
		t.Fatal(err)
	}
	web.Status.LoadBalancer = *st
	rp, _ := e.cloud.Routes()
	for _, n := range []*v1.Node{n1, n2} {
		if err := rp.CreateRoute(ctxT(t), cluster, "", &cloudprovider.Route{TargetNode: types.NodeName(n.Name), TargetNodeAddresses: n.Status.Addresses,
			DestinationCIDR: n.Spec.PodCIDRs[0]}); err != nil {
			t.Fatal(err)
		}
	}

	p, text := e.plan(t)
	if p.Pending() || !strings.Contains(text, "No changes.") {
		t.Fatalf("plan of a converged cluster:\n%s", text)
	}

	// Drift: exactly that repair.
	svcLB := naming.ServiceLBName(web.UID)
	lbID := azureid.LoadBalancer(e.sub, "rg", cluster)
	if _, err := e.sim.Drift(ctxT(t), drift.Request{Kind: drift.DeleteRule, Resource: lbID, Name: svcLB + "-TCP-80"}); err != nil {
		t.Fatal(err)
	}
	p, text = e.plan(t)
	if len(p.Resources) != 1 || p.Resources[0].Action != "update" || p.Resources[0].Name != cluster || len(p.Problems) != 0 {
		t.Fatalf("plan after a rule was deleted:\n%s", text)
	}
	if got, want := lines(text), []string{"service default/web: loadBalancingRules " + svcLB + "-TCP-80 added"}; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("plan lines %q, want %q\n%s", got, want, text)
	}
	if _, err := e.lb.EnsureLoadBalancer(ctxT(t), cluster, web, []*v1.Node{n1, n2}); err != nil {
		t.Fatal(err)
	}

	// Added while the CCM was stopped: a service (its public IP, frontend, rule, probe, NSG
	// rule), a node (its pool entry and its route), a service with a bad annotation, and the
	// deletion of web.
	newSvc := lbService("new", "22222222-0000-0000-0000-000000000002", nil)
	bad := lbService("bad", "33333333-0000-0000-0000-000000000003", map[string]string{annotations.TCPIdleTimeout: "1000"})
	n3 := kubeNode("n3", "10.240.0.6", "10.244.3.0/24")
	e.add(t, newSvc, bad, n3)
	now := metav1.Now()
	web.DeletionTimestamp = &now
	if _, err := e.kube.CoreV1().Services("default").Update(ctxT(t), web, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p, text = e.plan(t)
	t.Logf("plan:\n%s", text)
	byName := map[string]Resource{}
	for _, r := range p.Resources {
		byName[r.Type+" "+r.Name] = r
	}
	newLB := naming.ServiceLBName(newSvc.UID)
	webPIP, newPIP := cluster+"-"+svcLB, cluster+"-"+newLB
	for k, action := range map[string]string{
		dryrun.TypePublicIP + " " + newPIP:      "create",
		dryrun.TypePublicIP + " " + webPIP:      "delete",
		dryrun.TypeLoadBalancer + " " + cluster: "update",
		dryrun.TypeSecurityGroup + " nsg":       "update",
		dryrun.TypeRouteTable + " rt":           "update",
	} {
		if r, ok := byName[k]; !ok || r.Action != action {
			t.Errorf("%s: %+v, want %s", k, r, action)
		}
	}
	if len(p.Resources) != 5 {
		t.Errorf("%d resources, want 5", len(p.Resources))
	}
	for _, want := range []string{
		"service default/new: frontendIPConfigurations " + newLB + " added",
		"service default/new: loadBalancingRules " + newLB + "-TCP-80 added",
		"service default/new: probes " + newLB + "-TCP-80 added",
		"service default/web (being deleted): frontendIPConfigurations " + svcLB + " removed",
		"node n3 (route controller): routes n3____102443024 added",
		"<address of new public IP " + newPIP + ">",
		"properties.loadBalancerBackendAddresses[n3] = added",
		"! service default/bad: InvalidAnnotation:",
		"Plan: 1 to create, 3 to update, 1 to delete; 1 problem.",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("plan lacks %q", want)
		}
	}
	if strings.Count(text, "service default/bad") != 1 {
		t.Errorf("the bad annotation is reported more than once:\n%s", text)
	}
	var js bytes.Buffer
	if err := p.JSON(&js); err != nil || !strings.Contains(js.String(), `"action": "create"`) {
		t.Errorf("JSON: %v\n%s", err, js.String())
	}
}
