package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/migration"
	"github.com/azure-ccm/azure-ccm/test/framework"
	"github.com/azure-ccm/azure-ccm/test/framework/azurenames"
)

const (
	migCluster    = "kubernetes"
	migInternalIP = "10.240.15.200"
	// migExitEnv makes the CCM exit after the named migration phase (cmd/.../migration.go).
	migExitEnv = "AZURE_CCM_MIGRATION_EXIT_AFTER"
)

// migTopology is a cluster as the Basic mode leaves it, before its services: the primary VM set
// (Uniform scale set pool0) in the pools of the Basic load balancers kubernetes and
// kubernetes-internal, the availability set as0 in the pool of its own Basic load balancer as0
// (the existing provider's per-VM-set load balancer). Frontends, rules and public IPs are named
// after the services' UIDs, so the test adds them once the services exist.
func migTopology() *topology.Topology {
	t := framework.DefaultTopology()
	t.ResourceGroups = append(t.ResourceGroups, "rg-pips")
	t.ScaleSets[0].Zones = nil // Basic load balancers have no zones
	t.ScaleSets[0].Capacity = 2
	t.ScaleSets[0].LoadBalancerPools = []topology.PoolRef{{LoadBalancer: "kubernetes", Pool: migCluster},
		{LoadBalancer: "kubernetes-internal", Pool: migCluster}}
	t.AvailabilitySets = []topology.AvailabilitySet{{ResourceGroup: "rg-cluster", Name: "as0", VMs: 2,
		LoadBalancerPools: []topology.PoolRef{{LoadBalancer: "as0", Pool: migCluster}}}}
	for _, n := range []string{"kubernetes", "kubernetes-internal", "as0"} {
		t.LoadBalancers = append(t.LoadBalancers, topology.LoadBalancer{ResourceGroup: "rg-cluster", Name: n, SKU: "Basic",
			BackendPools: []string{migCluster}})
	}
	return t
}

// migService is one service of the Basic estate.
type migService struct {
	name     string
	lb       string // its Basic load balancer
	internal bool
	dynamic  bool // its Basic public IP is Dynamic
	ip       string
}

var migServices = []migService{
	{name: "web", lb: "kubernetes"},
	{name: "api", lb: "kubernetes", dynamic: true},
	{name: "legacy", lb: "as0"},
	{name: "backend", lb: "kubernetes-internal", internal: true},
}

// migSeed creates the services, their Basic frontends, rules, probes and public IPs (tagged as
// the existing provider tags them), and sets each service's status to its address, as the Basic
// mode left it. It returns the services with their addresses.
func migSeed(t *testing.T, l *lbEnv) []migService {
	t.Helper()
	ctx := lbCtx(t)
	out := append([]migService(nil), migServices...)
	for i := range out {
		s := &out[i]
		ann := map[string]string{}
		if s.internal {
			ann["service.beta.kubernetes.io/azure-load-balancer-internal"] = "true"
		}
		svc := l.create(lbService(s.name, ann))
		fe := azurenames.ServiceLBName(svc.UID)
		front := &armnetwork.FrontendIPConfiguration{Name: to.Ptr(fe), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{}}
		if s.internal {
			front.Properties.Subnet = &armnetwork.Subnet{ID: to.Ptr(fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/virtualNetworks/%s/subnets/%s",
				l.Azure.SubscriptionID, l.rg, l.Azure.VnetName, l.Azure.SubnetName))}
			front.Properties.PrivateIPAllocationMethod = to.Ptr(armnetwork.IPAllocationMethodStatic)
			front.Properties.PrivateIPAddress = to.Ptr(migInternalIP)
			s.ip = migInternalIP
		} else {
			alloc := armnetwork.IPAllocationMethodStatic
			if s.dynamic {
				alloc = armnetwork.IPAllocationMethodDynamic
			}
			pipName := azurenames.PublicIPName(migCluster, fe, "", false, azurenames.IPv4)
			p, err := l.net.NewPublicIPAddressesClient().BeginCreateOrUpdate(ctx, l.rg, pipName, armnetwork.PublicIPAddress{
				Location:   to.Ptr(l.Azure.Location),
				SKU:        &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameBasic)},
				Tags:       map[string]*string{azurenames.TagService: to.Ptr("default/" + s.name), azurenames.TagClusterName: to.Ptr(migCluster)},
				Properties: &armnetwork.PublicIPAddressPropertiesFormat{PublicIPAllocationMethod: to.Ptr(alloc)},
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			pip, err := p.PollUntilDone(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			front.Properties.PublicIPAddress = &armnetwork.PublicIPAddress{ID: pip.ID}
		}
		lbs := l.net.NewLoadBalancersClient()
		cur, err := lbs.Get(ctx, l.rg, s.lb, nil)
		if err != nil {
			t.Fatal(err)
		}
		lb := cur.LoadBalancer
		lbID := *lb.ID
		lb.Properties.FrontendIPConfigurations = append(lb.Properties.FrontendIPConfigurations, front)
		rule := fe + "-TCP-80"
		lb.Properties.Probes = append(lb.Properties.Probes, &armnetwork.Probe{Name: to.Ptr(rule), Properties: &armnetwork.ProbePropertiesFormat{
			Protocol: to.Ptr(armnetwork.ProbeProtocolTCP), Port: to.Ptr(svc.Spec.Ports[0].NodePort)}})
		lb.Properties.LoadBalancingRules = append(lb.Properties.LoadBalancingRules, &armnetwork.LoadBalancingRule{Name: to.Ptr(rule),
			Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
				FrontendIPConfiguration: &armnetwork.SubResource{ID: to.Ptr(lbID + "/frontendIPConfigurations/" + fe)},
				BackendAddressPool:      &armnetwork.SubResource{ID: to.Ptr(lbID + "/backendAddressPools/" + migCluster)},
				Probe:                   &armnetwork.SubResource{ID: to.Ptr(lbID + "/probes/" + rule)},
				Protocol:                to.Ptr(armnetwork.TransportProtocolTCP), FrontendPort: to.Ptr[int32](80), BackendPort: to.Ptr[int32](80),
				EnableFloatingIP: to.Ptr(true), IdleTimeoutInMinutes: to.Ptr[int32](4),
			}})
		p, err := lbs.BeginCreateOrUpdate(ctx, l.rg, s.lb, lb, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.PollUntilDone(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if !s.internal {
			pip, err := l.net.NewPublicIPAddressesClient().Get(ctx, l.rg, lastSeg(*front.Properties.PublicIPAddress.ID), nil)
			if err != nil {
				t.Fatal(err)
			}
			s.ip = pipAddress(&pip.PublicIPAddress)
			if s.ip == "" {
				t.Fatalf("public IP of %s has no address", s.name)
			}
		}
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: s.ip}}
		if _, err := l.Kube.CoreV1().Services("default").UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// migStart seeds azsim and the cluster as the Basic mode left them; the CCM is not started.
func migStart(t *testing.T) (*lbEnv, []migService) {
	t.Helper()
	e := framework.Start(t, framework.Options{Topology: migTopology()})
	nodesRequireBinary(t, framework.CCMBinaryName)
	e.CreateNodes(framework.NodeOptions{ProviderID: true}, e.Machines...)
	f, err := lbARMClient(e.Azure)
	if err != nil {
		t.Fatal(err)
	}
	l := &lbEnv{Env: e, t: t, net: f, rg: e.Azure.ResourceGroup, ns: "default"}
	svcs := migSeed(t, l)
	st := l.mustState()
	if n := len(st.LBs); n != 3 {
		t.Fatalf("seeded %d load balancers", n)
	}
	return l, svcs
}

// migMigrated is the end state: no Basic load balancer, every service on the Standard load
// balancer of its kind with its old address (in azsim and in its status), every node in both
// Standard pools, every public IP kept and Standard.
func migMigrated(l *lbEnv, svcs []migService) framework.Condition {
	return func(ctx context.Context) (bool, error) {
		st, err := l.state(ctx)
		if err != nil {
			return false, err
		}
		for name, lb := range st.LBs {
			if *lb.SKU.Name == armnetwork.LoadBalancerSKUNameBasic {
				return false, fmt.Errorf("Basic load balancer %s remains", name)
			}
		}
		external := 0
		for _, s := range svcs {
			if !s.internal {
				external++
			}
		}
		if len(st.PIPs) != external {
			return false, fmt.Errorf("%d public IPs, want %d", len(st.PIPs), external)
		}
		pipAddr := map[string]string{}
		for _, p := range st.PIPs {
			if *p.SKU.Name != armnetwork.PublicIPAddressSKUNameStandard {
				return false, fmt.Errorf("public IP %s is %s", *p.Name, *p.SKU.Name)
			}
			pipAddr[strings.ToLower(*p.ID)] = pipAddress(p)
		}
		for _, s := range svcs {
			svc, err := l.Kube.CoreV1().Services("default").Get(ctx, s.name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if got := ingressIPs(svc); len(got) != 1 || got[0] != s.ip {
				return false, fmt.Errorf("service %s status %v, want %s", s.name, got, s.ip)
			}
			lb := st.LBs[azurenames.LoadBalancerName(migCluster, s.internal)]
			if lb == nil {
				return false, fmt.Errorf("no Standard load balancer for %s", s.name)
			}
			v := view(lb, azurenames.ServiceLBName(svc.UID))
			if len(v.Rules) == 0 || len(v.Frontends) != 1 {
				return false, fmt.Errorf("service %s on %s: frontends %d rules %d", s.name, *lb.Name, len(v.Frontends), len(v.Rules))
			}
			for _, f := range v.Frontends {
				got := ""
				if f.Properties.PublicIPAddress != nil {
					got = pipAddr[strings.ToLower(*f.Properties.PublicIPAddress.ID)]
				} else if f.Properties.PrivateIPAddress != nil {
					got = *f.Properties.PrivateIPAddress
				}
				if got != s.ip {
					return false, fmt.Errorf("service %s frontend address %q, want %s", s.name, got, s.ip)
				}
			}
		}
		for _, name := range []string{"kubernetes", "kubernetes-internal"} {
			members := 0
			for _, p := range st.LBs[name].Properties.BackendAddressPools {
				if *p.Name == migCluster && p.Properties != nil {
					members = len(p.Properties.BackendIPConfigurations)
				}
			}
			if members != len(l.Machines) {
				return false, fmt.Errorf("pool of %s has %d members, want %d", name, members, len(l.Machines))
			}
		}
		return true, nil
	}
}

// migReport logs the per-service windows the migration events carry, and checks each service
// got its events.
func migReport(t *testing.T, l *lbEnv, svcs []migService) {
	t.Helper()
	err := l.Eventually(func(ctx context.Context) (bool, error) {
		evs, err := l.Kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		seen := map[string]map[string]string{}
		for _, ev := range evs.Items {
			if seen[ev.InvolvedObject.Name] == nil {
				seen[ev.InvolvedObject.Name] = map[string]string{}
			}
			seen[ev.InvolvedObject.Name][ev.Reason] = ev.Message
		}
		for _, s := range svcs {
			for _, r := range []string{migration.ReasonMigrating, migration.ReasonMigrated, migration.ReasonNoOutboundRule} {
				if _, ok := seen[s.name][r]; !ok {
					return false, fmt.Errorf("service %s has no %s event", s.name, r)
				}
			}
		}
		for _, s := range svcs {
			t.Logf("%s: %s", s.name, seen[s.name][migration.ReasonMigrated])
		}
		return true, nil
	}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
}

// TestMigrationBasicToStandard: a cluster left by the Basic mode (Basic load balancers with
// NIC-based pools on a scale set and an availability set, Basic public IPs, internal and
// external services with their IPs in status) is migrated when the CCM starts with
// loadBalancerSku=standard.
func TestMigrationBasicToStandard(t *testing.T) {
	working(t)
	l, svcs := migStart(t)
	l.StartCCM()
	l.waitFor("the migration's end state", migMigrated(l, svcs), 3*time.Minute)
	migReport(t, l, svcs)
	log, err := os.ReadFile(l.CCMLogPath())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "Basic to Standard load balancer migration finished") {
		t.Error("the CCM log has no migration summary")
	}
	// A restart finds nothing left to migrate.
	l.RestartCCM()
	l.waitFor("the end state after a restart", migMigrated(l, svcs), time.Minute)
}

// TestMigrationBasicToStandardCrashResume kills the CCM after every migration phase (it exits
// on purpose) and starts it again: it converges to the same end state.
func TestMigrationBasicToStandardCrashResume(t *testing.T) {
	working(t)
	l, svcs := migStart(t)
	for _, ph := range migration.Phases() {
		l.SetCCMEnv(migExitEnv + "=" + ph.String())
		l.StartCCM()
		select {
		case <-l.CCM().Done():
		case <-time.After(3 * time.Minute):
			t.Fatalf("the CCM did not exit after phase %s (binaries built without -tags testhooks have no exit hook: make build)", ph)
		}
		_ = l.StopCCM() // it exited by itself: that is the point
		log, _ := os.ReadFile(l.CCMLogPath())
		if !strings.Contains(string(log), `"Exiting after migration phase (test hook)" phase="`+ph.String()+`"`) {
			t.Fatalf("the CCM exited, but not after phase %s", ph)
		}
		t.Logf("CCM killed after phase %s", ph)
	}
	// Every start resumed where the previous one stopped: each phase ran exactly once.
	log, err := os.ReadFile(l.CCMLogPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, ph := range migration.Phases() {
		if n := strings.Count(string(log), `"Migration phase done" phase="`+ph.String()+`"`); n != 1 {
			t.Errorf("phase %s ran %d times", ph, n)
		}
	}
	l.SetCCMEnv()
	l.StartCCM()
	l.waitFor("the migration's end state after the crashes", migMigrated(l, svcs), 3*time.Minute)
	l.waitFor("the last start to find nothing to migrate", func(context.Context) (bool, error) {
		log, err := os.ReadFile(l.CCMLogPath())
		return strings.Contains(string(log), "Basic to Standard load balancer migration: nothing to migrate"), err
	}, time.Minute)
}
