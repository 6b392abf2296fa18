package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/internal/azsim/client"
	"github.com/azure-ccm/azure-ccm/internal/azsim/middleware"
	"github.com/azure-ccm/azure-ccm/internal/cloudconfig"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/test/framework"
	"github.com/azure-ccm/azure-ccm/test/framework/azurenames"
)

const excludeLabel = "node.kubernetes.io/exclude-from-external-load-balancers"

// unmanagedLabel is the label the node filter of TestLoadBalancerBehaviour's CCM excludes.
const unmanagedLabel = "azure-ccm.test/unmanaged"

// TestLoadBalancerBehaviour: node exclusion, the node filter, foreign loadBalancerClass, invalid
// annotations and a burst of services, with nodeIP pools. The CCM runs with a node filter that
// every node matches until the filter's subtest labels one.
func TestLoadBalancerBehaviour(t *testing.T) {
	working(t)
	l := lbStart(t, lbOptions{CloudConfig: lbNodeIPConfig, CCMArgs: []string{"--node-filter-requirements=!" + unmanagedLabel},
		BeforeCCM: leftoverSecret})
	t.Run("node exclusion label", func(t *testing.T) { lbTestExclusion(l.with(t)) })
	t.Run("a leftover Secret does not override the file", func(t *testing.T) { lbTestLeftoverSecret(l.with(t)) })
	t.Run("node filter", func(t *testing.T) { lbTestNodeFilter(l.with(t)) })
	t.Run("foreign loadBalancerClass", func(t *testing.T) { lbTestForeignClass(l.with(t)) })
	t.Run("invalid annotation", func(t *testing.T) { lbTestInvalid(l.with(t)) })
	t.Run("burst of services", func(t *testing.T) { lbTestBurst(l.with(t)) })
}

// TestLoadBalancerNodeIPConfiguration runs the lifecycle and node exclusion with the default
// backend: the nodes' NIC / scale-set VM ip configurations join the pool.
func TestLoadBalancerNodeIPConfiguration(t *testing.T) {
	working(t)
	l := lbStart(t, lbOptions{})
	t.Run("lifecycle", func(t *testing.T) { lbTestLifecycle(l.with(t)) })
	t.Run("node exclusion label", func(t *testing.T) { lbTestExclusion(l.with(t)) })
}

// poolNodes are the nodes in the cluster's IPv4 pool of lb, by address (nodeIP pools) or by the
// ip configurations that reference the pool (nodeIPConfiguration pools).
func (l *lbEnv) poolNodes(lb *armnetwork.LoadBalancer) []string {
	var ipcs []string
	addrs := poolIPs(lb, lbCluster)
	if lb != nil && lb.Properties != nil {
		for _, p := range lb.Properties.BackendAddressPools {
			if *p.Name == lbCluster && p.Properties != nil {
				for _, c := range p.Properties.BackendIPConfigurations {
					ipcs = append(ipcs, strings.ToLower(deref(c.ID)))
				}
			}
		}
	}
	var out []string
	for _, m := range l.Machines {
		vm := strings.ToLower(strings.TrimPrefix(m.ProviderID, "azure://")) + "/"
		in := slices.Contains(addrs, m.InternalIPs[0]) || slices.ContainsFunc(ipcs, func(id string) bool {
			return strings.HasPrefix(id, vm)
		})
		if in {
			out = append(out, m.NodeName)
		}
	}
	sort.Strings(out)
	return out
}

func (l *lbEnv) nodeNames(except ...string) []string {
	var out []string
	for _, m := range l.Machines {
		if !slices.Contains(except, m.NodeName) {
			out = append(out, m.NodeName)
		}
	}
	sort.Strings(out)
	return out
}

func (l *lbEnv) waitPool(lbName string, want []string) {
	l.t.Helper()
	l.waitFor(fmt.Sprintf("pool of %s = %v", lbName, want), func(ctx context.Context) (bool, error) {
		st, err := l.state(ctx)
		if err != nil {
			return false, err
		}
		got := l.poolNodes(st.LBs[lbName])
		return slices.Equal(got, want), fmt.Errorf("pool has %v", got)
	}, lbWait)
}

// labelNode sets key=true on the node, or removes key.
func (l *lbEnv) labelNode(name, key string, set bool) {
	l.t.Helper()
	err := l.Eventually(func(ctx context.Context) (bool, error) {
		n, err := nodesGet(ctx, l.Env, name)
		if err != nil {
			return false, err
		}
		if set {
			n.Labels[key] = "true"
		} else {
			delete(n.Labels, key)
		}
		_, err = l.Kube.CoreV1().Nodes().Update(ctx, n, updateOpts)
		return err == nil, err
	}, 30*time.Second)
	if err != nil {
		l.t.Fatalf("label node %s: %v", name, err)
	}
}

// lbTestExclusion: the exclusion label takes a node out of the pool and its removal puts it back.
func lbTestExclusion(l *lbEnv) {
	s := l.create(lbService("exclusion", nil))
	s = l.waitIP(s.Name)
	l.waitPool(lbCluster, l.nodeNames())
	node := l.Machines[0].NodeName
	l.labelNode(node, excludeLabel, true)
	l.waitPool(lbCluster, l.nodeNames(node))
	l.labelNode(node, excludeLabel, false)
	l.waitPool(lbCluster, l.nodeNames())
	l.deleteAndWaitGone(s)
}

// leftoverSecret creates kube-system/azure-cloud-provider as an old install leaves it: a whole
// azure.json with a tag the file does not have. The CCM runs with --cloud-config and the file
// sets no cloudConfigType, so, as with the existing provider, the Secret must not be read into
// the configuration.
func leftoverSecret(e *framework.Env) {
	doc := e.Azure.CloudConfig()
	doc["tags"] = "leftover=secret"
	b, err := json.Marshal(doc)
	if err != nil {
		e.T.Fatalf("leftover Secret: %v", err)
	}
	if _, err := e.Kube.CoreV1().Secrets(cloudconfig.DefaultSecretNamespace).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: cloudconfig.DefaultSecretNamespace, Name: cloudconfig.DefaultSecretName},
		Data:       map[string][]byte{cloudconfig.SecretKey: b},
	}, metav1.CreateOptions{}); err != nil {
		e.T.Fatalf("leftover Secret: %v", err)
	}
}

// lbTestLeftoverSecret: with the leftover Secret of leftoverSecret in place, what the CCM writes
// carries none of its tags (a Secret that is read tags the load balancer and public IPs: see
// TestCloudConfigSecretReload).
func lbTestLeftoverSecret(l *lbEnv) {
	s := l.create(lbService("leftover-secret", nil))
	s = l.waitIP(s.Name)
	st := l.mustState()
	lb := st.LBs[lbCluster]
	if lb == nil {
		l.t.Fatalf("no load balancer %s", lbCluster)
	}
	if v, ok := lb.Tags["leftover"]; ok {
		l.t.Errorf("load balancer %s has the leftover Secret's tag leftover=%s", lbCluster, deref(v))
	}
	for name, pip := range st.PIPs {
		if v, ok := pip.Tags["leftover"]; ok {
			l.t.Errorf("public IP %s has the leftover Secret's tag leftover=%s", name, deref(v))
		}
	}
	l.deleteAndWaitGone(s)
}

// lbTestNodeFilter: --node-filter-requirements=!azure-ccm.test/unmanaged. A node that stops
// matching is no longer the CCM's: it leaves the backend pool as a deleted node would; matching
// again brings it back.
func lbTestNodeFilter(l *lbEnv) {
	s := l.create(lbService("node-filter", nil))
	s = l.waitIP(s.Name)
	l.waitPool(lbCluster, l.nodeNames())
	node := l.Machines[1].NodeName
	l.labelNode(node, unmanagedLabel, true)
	l.waitPool(lbCluster, l.nodeNames(node))
	l.labelNode(node, unmanagedLabel, false)
	l.waitPool(lbCluster, l.nodeNames())
	l.deleteAndWaitGone(s)
}

// lbTestForeignClass: a service of another load balancer class gets nothing from us.
func lbTestForeignClass(l *lbEnv) {
	t := l.t
	foreign := lbService("foreign", nil)
	foreign.Spec.LoadBalancerClass = ptr("example.com/other-lb")
	foreign = l.create(foreign)
	ours := l.waitIP(l.create(lbService("ours", nil)).Name)
	// The controller has handled later events; the foreign service must still have nothing.
	f := l.get(foreign.Name)
	eqs(t, "foreign service ingress", ingressIPs(f), nil)
	st := l.mustState()
	for _, lb := range st.LBs {
		if o := lbObjectsOf(lb, azurenames.ServiceLBName(f.UID)); len(o) > 0 {
			t.Errorf("LB %s has objects of the foreign service: %v", *lb.Name, o)
		}
	}
	for k := range st.PIPs {
		if strings.Contains(k, azurenames.ServiceLBName(f.UID)) {
			t.Errorf("public IP %s for the foreign service", k)
		}
	}
	l.deleteAndWaitGone(ours)
	if err := l.Kube.CoreV1().Services(l.ns).Delete(lbCtx(t), f.Name, deleteOpts); err != nil {
		t.Fatal(err)
	}
}

// lbTestInvalid: an invalid annotation gives a Warning event naming annotation and value, retried,
// and not one ARM write.
func lbTestInvalid(l *lbEnv) {
	t := l.t
	before := l.stats()
	s := l.create(lbService("invalid", map[string]string{annotations.TCPIdleTimeout: "forever"}))
	l.waitFor("two InvalidAnnotation warnings (first try and a retry)", func(ctx context.Context) (bool, error) {
		evs, err := l.warningEvents(ctx, s.Name)
		if err != nil {
			return false, err
		}
		var n int32
		for _, e := range evs {
			if e.Reason != "InvalidAnnotation" {
				continue
			}
			if !strings.Contains(e.Message, annotations.TCPIdleTimeout) || !strings.Contains(e.Message, "forever") {
				return false, fmt.Errorf("event %q does not name the annotation and value", e.Message)
			}
			n += max(e.Count, 1)
		}
		return n >= 2, fmt.Errorf("%d InvalidAnnotation warnings", n)
	}, lbWait)
	after := l.stats()
	eq(t, "ARM writes for the invalid service", armWrites(after)-armWrites(before), int64(0))
	eqs(t, "ingress", ingressIPs(l.get(s.Name)), nil)
	// Fixing the annotation lets it through.
	l.update(s.Name, func(s *corev1.Service) { s.Annotations[annotations.TCPIdleTimeout] = "15" })
	s = l.waitIP(s.Name)
	v := view(l.mustState().LBs[lbCluster], azurenames.ServiceLBName(s.UID))
	eq(t, "idle timeout once fixed", deref(ruleOf(t, v, s, corev1.ProtocolTCP, 80).IdleTimeoutInMinutes), int32(15))
	l.deleteAndWaitGone(s)
}

// lbTestBurst: 12 services created at once cost far fewer LB and NSG writes than services, and all
// of them are cleaned up after a burst of deletions.
func lbTestBurst(l *lbEnv) {
	t := l.t
	const n = 12
	// ARM-like latencies: writes take a while, so changes queued meanwhile merge into the next
	// write (with instant writes there would be nothing to merge).
	ctx := lbCtx(t)
	if err := l.Azsim.SetLatency(ctx, client.LatencyModel{Rules: []client.LatencyRule{
		{Class: "write", Delay: middleware.Duration(300 * time.Millisecond)},
		{Class: "read", Delay: middleware.Duration(20 * time.Millisecond)},
	}}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Azsim.SetLatency(context.Background(), client.LatencyModel{}) }()
	before := l.stats()
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("burst-%02d", i))
	}
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			svc := lbService(name, nil, lbTCP(int32(8000+i)))
			if _, err := l.Kube.CoreV1().Services(l.ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
				t.Errorf("create %s: %v", name, err)
			}
		})
	}
	wg.Wait()
	var svcs []*corev1.Service
	for _, name := range names {
		svcs = append(svcs, l.waitIP(name))
	}
	after := l.stats()
	lbW := after.Writes("loadBalancers") - before.Writes("loadBalancers")
	nsgW := after.Writes("networkSecurityGroups") - before.Writes("networkSecurityGroups")
	pipW := after.Writes("publicIPAddresses") - before.Writes("publicIPAddresses")
	poolW := after.Writes("backendAddressPools") - before.Writes("backendAddressPools")
	t.Logf("%d services: %d LB writes, %d NSG writes, %d PIP writes, %d pool writes", n, lbW, nsgW, pipW, poolW)
	if lbW > n/3 || nsgW > n/3 {
		t.Errorf("%d services cost %d LB and %d NSG writes; want at most %d each (merged)", n, lbW, nsgW, n/3)
	}
	eq(t, "PIP writes (one per service)", pipW, int64(n))
	st := l.mustState()
	var all []string
	for _, s := range svcs {
		all = append(all, lbObjectsOf(st.LBs[lbCluster], azurenames.ServiceLBName(s.UID))...)
	}
	eq(t, "frontends+rules+probes", len(all), 3*n)
	for _, s := range svcs {
		if err := l.Kube.CoreV1().Services(l.ns).Delete(lbCtx(t), s.Name, deleteOpts); err != nil {
			t.Fatal(err)
		}
	}
	l.waitFor("every burst service gone and the LB deleted", func(ctx context.Context) (bool, error) {
		st, err := l.state(ctx)
		if err != nil {
			return false, err
		}
		if lb := st.LBs[lbCluster]; lb != nil {
			return false, fmt.Errorf("LB left with %d frontends", len(lb.Properties.FrontendIPConfigurations))
		}
		for k := range st.PIPs {
			return false, fmt.Errorf("public IP %s left", k)
		}
		if rs := managedRules(st.NSG); len(rs) > 0 {
			return false, fmt.Errorf("NSG rules left: %v", rs)
		}
		return true, nil
	}, lbWait)
}

func managedRules(nsg *armnetwork.SecurityGroup) []string {
	var out []string
	for _, r := range nsg.Properties.SecurityRules {
		if azurenames.IsManagedSecurityRule(*r.Name, deref(r.Properties.Priority)) {
			out = append(out, *r.Name)
		}
	}
	return out
}
