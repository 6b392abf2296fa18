package loadbalancer

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/membership"
)

// poolAddresses reads a nodeIP pool's addresses from azsim.
func (e *env) poolAddresses(t *testing.T, lbName, pool string) []string {
	t.Helper()
	resp, err := e.net.NewLoadBalancerBackendAddressPoolsClient().Get(ctxT(t), testRG, lbName, pool, nil)
	if err != nil {
		t.Fatalf("pool %s/%s: %v", lbName, pool, err)
	}
	var out []string
	for _, a := range resp.Properties.LoadBalancerBackendAddresses {
		out = append(out, *a.Properties.IPAddress)
	}
	sort.Strings(out)
	return out
}

func dualNode(name, v4, v6 string, labels map[string]string) *v1.Node {
	n := node(name, v4, labels)
	n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: v6})
	return n
}

// TestNodeIPPoolsDualStackAndIPv6 checks that nodeIP pools get each family's node addresses:
// IPv4 addresses in <cluster>, IPv6 addresses in <cluster>-IPv6.
func TestNodeIPPoolsDualStackAndIPv6(t *testing.T) {
	e := newEnv(t, config.BackendPoolNodeIP)
	ctx := ctxT(t)
	nodes := []*v1.Node{dualNode("node-0", "10.240.0.4", "fd00::4", nil), dualNode("node-1", "10.240.0.5", "fd00::5", nil),
		dualNode("excluded", "10.240.0.6", "fd00::6", map[string]string{membership.LabelExcludeFromLB: ""})}

	dual := service("abababab-0000-0000-0000-000000000001", "dual", nil)
	pol := v1.IPFamilyPolicyRequireDualStack
	dual.Spec.IPFamilyPolicy = &pol
	dual.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	st, err := e.lb.EnsureLoadBalancer(ctx, testCluster, dual, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Ingress) != 2 {
		t.Fatalf("dual-stack status %+v", st)
	}
	if got := e.poolAddresses(t, testCluster, testCluster); fmt.Sprint(got) != "[10.240.0.4 10.240.0.5]" {
		t.Fatalf("IPv4 pool %v", got)
	}
	if got := e.poolAddresses(t, testCluster, testCluster+"-IPv6"); fmt.Sprint(got) != "[fd00::4 fd00::5]" {
		t.Fatalf("IPv6 pool %v", got)
	}
	before := e.writes(t)
	dual.Status.LoadBalancer = *st
	if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, dual, nodes); err != nil {
		t.Fatal(err)
	}
	if e.writes(t) != before {
		t.Fatal("dual-stack steady state wrote")
	}

	if err := e.lb.EnsureLoadBalancerDeleted(ctx, testCluster, dual); err != nil {
		t.Fatal(err)
	}
	if _, err := e.net.NewLoadBalancersClient().Get(ctx, testRG, testCluster, nil); err == nil {
		t.Fatal("load balancer kept after its only service was deleted")
	}
}

// TestIPv6OnlyInternalService runs an IPv6-only internal service on a dual-stack subnet with both
// pool types: only the IPv6 pool of <cluster>-internal gets members.
func TestIPv6OnlyInternalService(t *testing.T) {
	for _, poolType := range []string{config.BackendPoolNodeIP, config.BackendPoolNodeIPConfiguration} {
		t.Run(poolType, func(t *testing.T) {
			e := newIPCEnv(t, ipcTopology(true), fmt.Sprintf(`,"loadBalancerBackendPoolConfigurationType":%q`, poolType))
			ctx := ctxT(t)
			all := e.machineNodes()
			svc := service("abababab-0000-0000-0000-000000000002", "v6", map[string]string{annotations.Internal: "true"})
			svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol}
			st, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, all)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Ingress) != 1 || !strings.Contains(st.Ingress[0].IP, ":") {
				t.Fatalf("status %+v", st)
			}
			lb, err := e.clients.Network.NewLoadBalancersClient().Get(ctx, testRG, testCluster+"-internal", nil)
			if err != nil {
				t.Fatal(err)
			}
			var pools []string
			for _, p := range lb.Properties.BackendAddressPools {
				pools = append(pools, *p.Name)
			}
			if fmt.Sprint(pools) != "["+testCluster+"-IPv6]" {
				t.Fatalf("pools %v", pools)
			}
			var got []string
			if poolType == config.BackendPoolNodeIP {
				resp, err := e.clients.Network.NewLoadBalancerBackendAddressPoolsClient().Get(ctx, testRG, testCluster+"-internal", testCluster+"-IPv6", nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, a := range resp.Properties.LoadBalancerBackendAddresses {
					got = append(got, *a.Name)
				}
				sort.Strings(got)
			} else {
				got = e.internalPoolMachines(t, ctx, testCluster+"-IPv6")
			}
			if want := nodeNames(all); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("IPv6 pool members %v want %v", got, want)
			}
			if err := e.lb.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
				t.Fatal(err)
			}
			e.assertNoPoolRefs(t, ctx)
		})
	}
}

// IP-based pools honour excludeMasterFromStandardLB (false: control-plane nodes join) and
// preConfiguredBackendPoolLoadBalancerTypes (those load balancers' pools are left alone).
func TestNodeIPPoolsHonourMasterExclusionAndPreConfigured(t *testing.T) {
	nodes := []*v1.Node{node("worker", "10.240.0.4", nil),
		node("cp", "10.240.0.5", map[string]string{membership.LabelRoleControlPlane: ""})}
	for _, tc := range []struct {
		name          string
		excludeMaster *bool
		preConfigured string
		public        string // want on <cluster>
		internal      string // want on <cluster>-internal
	}{
		{name: "defaults: control plane out", public: "[10.240.0.4]", internal: "[10.240.0.4]"},
		{name: "excludeMasterFromStandardLB false", excludeMaster: new(bool), public: "[10.240.0.4 10.240.0.5]", internal: "[10.240.0.4 10.240.0.5]"},
		{name: "external pre-configured", preConfigured: "external", public: "[]", internal: "[10.240.0.4]"},
		{name: "internal pre-configured", preConfigured: "internal", public: "[10.240.0.4]", internal: "[]"},
		{name: "all pre-configured", preConfigured: "all", public: "[]", internal: "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, config.BackendPoolNodeIP)
			e.cfg.ExcludeMasterFromStandardLB = tc.excludeMaster
			e.cfg.PreConfiguredBackendPoolLoadBalancerTypes = tc.preConfigured
			e.build(t, BuildOptions{})
			ctx := ctxT(t)
			for i, internal := range []bool{false, true} {
				ann := map[string]string{}
				if internal {
					ann[annotations.Internal] = "true"
				}
				if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, service(fmt.Sprintf("acacaca%d-0000-0000-0000-000000000000", i), fmt.Sprintf("s%d", i), ann), nodes); err != nil {
					t.Fatal(err)
				}
			}
			if got := fmt.Sprint(e.poolAddresses(t, testCluster, testCluster)); got != tc.public {
				t.Errorf("public pool %s, want %s", got, tc.public)
			}
			if got := fmt.Sprint(e.poolAddresses(t, testCluster+"-internal", testCluster)); got != tc.internal {
				t.Errorf("internal pool %s, want %s", got, tc.internal)
			}
		})
	}
}
