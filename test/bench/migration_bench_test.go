//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azarm "github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	azto "github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/azure-ccm/azure-ccm/internal/azsim/middleware"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	"github.com/azure-ccm/azure-ccm/internal/azureid"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/migration"
	"github.com/azure-ccm/azure-ccm/test/framework"
	"github.com/azure-ccm/azure-ccm/test/framework/azurenames"
)

// TestMigrationBench migrates 50 services (40 public on two Basic load balancers, 10 internal)
// of a Basic-mode cluster (3 scale set instances, 2 availability set VMs) through the real CCM,
// against azsim with 1 s on every ARM write and delete, and reports the ARM calls, the run time
// and each service's window (Basic load balancer deleted → Standard path done).
func TestMigrationBench(t *testing.T) {
	const external, internal = 40, 10
	if _, err := os.Stat(filepath.Join(framework.BinDir(), framework.CCMBinaryName)); err != nil && ccmBinary() == "" {
		t.Skipf("CCM not built: %v", err)
	}
	topo := framework.DefaultTopology()
	topo.ScaleSets[0].Zones, topo.ScaleSets[0].Capacity = nil, 3
	topo.ScaleSets[0].LoadBalancerPools = []topology.PoolRef{{LoadBalancer: "kubernetes", Pool: "kubernetes"},
		{LoadBalancer: "kubernetes-internal", Pool: "kubernetes"}}
	topo.AvailabilitySets = []topology.AvailabilitySet{{ResourceGroup: "rg-cluster", Name: "as0", VMs: 2,
		LoadBalancerPools: []topology.PoolRef{{LoadBalancer: "as0", Pool: "kubernetes"}}}}
	for _, n := range []string{"kubernetes", "kubernetes-internal", "as0"} {
		topo.LoadBalancers = append(topo.LoadBalancers, topology.LoadBalancer{ResourceGroup: "rg-cluster", Name: n, SKU: "Basic",
			BackendPools: []string{"kubernetes"}})
	}
	e := framework.Start(t, framework.Options{CCMBinary: ccmBinary(), Topology: topo, ClusterExtraArgs: clusterArgs})
	e.CreateNodes(framework.NodeOptions{ProviderID: true}, e.Machines...)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	net := benchNetwork(t, e.Azure)
	rg := e.Azure.ResourceGroup

	// The Basic estate: services, their public IPs, frontends, rules and probes, and statuses.
	type svcInfo struct {
		svc *corev1.Service
		lb  string
		ip  string
	}
	var svcs []*svcInfo
	lbs := map[string]*armnetwork.LoadBalancer{}
	for _, n := range []string{"kubernetes", "kubernetes-internal", "as0"} {
		cur, err := net.NewLoadBalancersClient().Get(ctx, rg, n, nil)
		if err != nil {
			t.Fatal(err)
		}
		lbs[n] = &cur.LoadBalancer
	}
	subnet := fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/virtualNetworks/%s/subnets/%s",
		e.Azure.SubscriptionID, rg, e.Azure.VnetName, e.Azure.SubnetName)
	for i := 0; i < external+internal; i++ {
		in := i >= external
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("svc-%03d", i), Annotations: map[string]string{}},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "x"},
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}}}
		if in {
			svc.Annotations["service.beta.kubernetes.io/azure-load-balancer-internal"] = "true"
		}
		created, err := e.Kube.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		info := &svcInfo{svc: created, lb: "kubernetes"}
		fe := azurenames.ServiceLBName(created.UID)
		front := &armnetwork.FrontendIPConfiguration{Name: azto.Ptr(fe), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{}}
		switch {
		case in:
			info.lb, info.ip = "kubernetes-internal", fmt.Sprintf("10.240.15.%d", 10+i)
			front.Properties.Subnet = &armnetwork.Subnet{ID: azto.Ptr(subnet)}
			front.Properties.PrivateIPAllocationMethod = azto.Ptr(armnetwork.IPAllocationMethodStatic)
			front.Properties.PrivateIPAddress = azto.Ptr(info.ip)
		default:
			if i%2 == 1 {
				info.lb = "as0"
			}
			name := azurenames.PublicIPName("kubernetes", fe, "", false, azurenames.IPv4)
			p, err := net.NewPublicIPAddressesClient().BeginCreateOrUpdate(ctx, rg, name, armnetwork.PublicIPAddress{
				Location: azto.Ptr(e.Azure.Location), SKU: &armnetwork.PublicIPAddressSKU{Name: azto.Ptr(armnetwork.PublicIPAddressSKUNameBasic)},
				Tags:       map[string]*string{azurenames.TagService: azto.Ptr("default/" + svc.Name), azurenames.TagClusterName: azto.Ptr("kubernetes")},
				Properties: &armnetwork.PublicIPAddressPropertiesFormat{PublicIPAllocationMethod: azto.Ptr(armnetwork.IPAllocationMethodStatic)},
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			pip, err := p.PollUntilDone(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			info.ip = *pip.Properties.IPAddress
			front.Properties.PublicIPAddress = &armnetwork.PublicIPAddress{ID: pip.ID}
		}
		lb := lbs[info.lb]
		rule := fe + "-TCP-80"
		lb.Properties.FrontendIPConfigurations = append(lb.Properties.FrontendIPConfigurations, front)
		lb.Properties.Probes = append(lb.Properties.Probes, &armnetwork.Probe{Name: azto.Ptr(rule), Properties: &armnetwork.ProbePropertiesFormat{
			Protocol: azto.Ptr(armnetwork.ProbeProtocolTCP), Port: azto.Ptr(created.Spec.Ports[0].NodePort)}})
		lb.Properties.LoadBalancingRules = append(lb.Properties.LoadBalancingRules, &armnetwork.LoadBalancingRule{Name: azto.Ptr(rule),
			Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
				FrontendIPConfiguration: &armnetwork.SubResource{ID: azto.Ptr(*lb.ID + "/frontendIPConfigurations/" + fe)},
				BackendAddressPool:      &armnetwork.SubResource{ID: azto.Ptr(*lb.ID + "/backendAddressPools/kubernetes")},
				Probe:                   &armnetwork.SubResource{ID: azto.Ptr(*lb.ID + "/probes/" + rule)},
				Protocol:                azto.Ptr(armnetwork.TransportProtocolTCP), FrontendPort: azto.Ptr[int32](80), BackendPort: azto.Ptr[int32](80),
				EnableFloatingIP: azto.Ptr(true), IdleTimeoutInMinutes: azto.Ptr[int32](4)}})
		svcs = append(svcs, info)
	}
	for name, lb := range lbs {
		p, err := net.NewLoadBalancersClient().BeginCreateOrUpdate(ctx, rg, name, *lb, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.PollUntilDone(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range svcs {
		s.svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: s.ip}}
		if _, err := e.Kube.CoreV1().Services("default").UpdateStatus(ctx, s.svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// Every ARM write and delete now takes 1 s.
	d := middleware.Duration(time.Second)
	if err := e.Azsim.SetLatency(ctx, middleware.LatencyModel{Rules: []middleware.LatencyRule{{Class: middleware.Write, Delay: d},
		{Class: middleware.Delete, Delay: d}}}); err != nil {
		t.Fatal(err)
	}
	if err := e.Azsim.ResetStats(ctx); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	e.StartCCM()
	e.WaitFor("the migration summary in the CCM log", func(context.Context) (bool, error) {
		b, err := os.ReadFile(e.CCMLogPath())
		return strings.Contains(string(b), "Basic to Standard load balancer migration finished"), err
	}, 10*time.Minute)
	took := time.Since(began)
	st, err := e.Azsim.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// End state: no Basic load balancer, every service on its Standard load balancer with its IP.
	e.WaitFor("every service on the Standard load balancers with its address", func(ctx context.Context) (bool, error) {
		pager := net.NewLoadBalancersClient().NewListPager(rg, nil)
		addrs := map[string]bool{}
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				return false, err
			}
			for _, lb := range page.Value {
				if *lb.SKU.Name == armnetwork.LoadBalancerSKUNameBasic {
					return false, fmt.Errorf("basic load balancer %s remains", *lb.Name)
				}
				for _, f := range lb.Properties.FrontendIPConfigurations {
					if f.Properties.PrivateIPAddress != nil {
						addrs[*f.Properties.PrivateIPAddress] = true
					}
					if f.Properties.PublicIPAddress != nil {
						pip, err := net.NewPublicIPAddressesClient().Get(ctx, rg, azureid.Name(*f.Properties.PublicIPAddress.ID), nil)
						if err != nil {
							return false, err
						}
						addrs[*pip.Properties.IPAddress] = true
					}
				}
			}
		}
		for _, s := range svcs {
			if !addrs[s.ip] {
				return false, fmt.Errorf("%s (%s) not on a Standard frontend", s.svc.Name, s.ip)
			}
		}
		return true, nil
	}, 5*time.Minute)

	var lines []string
	var reads, writes int64
	for _, c := range st.Requests {
		lines = append(lines, fmt.Sprintf("  %-7s %-58s %d ×%d", c.Method, c.ResourceType, c.Status, c.Count))
		if c.Method == "GET" {
			reads += c.Count
		} else {
			writes += c.Count
		}
	}
	sort.Strings(lines)
	windows := benchWindows(t, e)
	t.Logf("migration of %d services (%d public, %d internal), %d nodes, 3 Basic load balancers, 1 s per ARM write/delete:\n"+
		"CCM start → migration finished %s; ARM reads %d (incl. LRO polls), writes+deletes %d\n%s\nper-service window (Basic LB deleted → Standard path done): %s",
		external+internal, external, internal, len(e.Machines), took.Round(100*time.Millisecond), reads, writes, strings.Join(lines, "\n"), windows)
}

var windowRE = regexp.MustCompile(`; ([0-9.]+m?s) from its Basic load balancer's deletion`)

// benchWindows summarises the windows carried by the MigratedToStandardLoadBalancer events.
func benchWindows(t *testing.T, e *framework.Env) string {
	t.Helper()
	var ds []time.Duration
	err := e.Eventually(func(ctx context.Context) (bool, error) {
		evs, err := e.Kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		ds = ds[:0]
		for _, ev := range evs.Items {
			if ev.Reason != migration.ReasonMigrated {
				continue
			}
			if m := windowRE.FindStringSubmatch(ev.Message); m != nil {
				if d, err := time.ParseDuration(m[1]); err == nil {
					ds = append(ds, d)
				}
			}
		}
		return len(ds) == 50, fmt.Errorf("%d windows", len(ds))
	}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return fmt.Sprintf("min %s, median %s, p90 %s, max %s", ds[0], ds[len(ds)/2], ds[len(ds)*9/10], ds[len(ds)-1])
}

// benchNetwork is an SDK client factory logged in to azsim as the CCM's service principal.
func benchNetwork(t *testing.T, a *framework.Azure) *armnetwork.ClientFactory {
	t.Helper()
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
		t.Fatal(err)
	}
	f, err := armnetwork.NewClientFactory(a.SubscriptionID, cred, &azarm.ClientOptions{ClientOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	return f
}
