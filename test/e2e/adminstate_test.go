package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/azure-ccm/azure-ccm/internal/azsim/middleware"
	"github.com/azure-ccm/azure-ccm/internal/controllers/adminstate/planner"
	"github.com/azure-ccm/azure-ccm/test/framework"
)

// adminStateLBs are the cluster's load balancers in this test: a public and an internal service.
var adminStateLBs = []string{"kubernetes", "kubernetes-internal"}

// adminStatePool reads the cluster's IPv4 pool of a load balancer from azsim: address -> admin
// state ("" when unset).
func adminStatePool(ctx context.Context, e *framework.Env, lb string) (map[string]string, error) {
	id := fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/loadBalancers/%s/backendAddressPools/kubernetes",
		e.Azure.SubscriptionID, e.Azure.ResourceGroup, lb)
	doc, err := e.Azsim.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	props, _ := doc["properties"].(map[string]any)
	addrs, _ := props["loadBalancerBackendAddresses"].([]any)
	for _, a := range addrs {
		ap, _ := a.(map[string]any)["properties"].(map[string]any)
		ip, _ := ap["ipAddress"].(string)
		st, _ := ap["adminState"].(string)
		out[ip] = st
	}
	return out, nil
}

// adminStateIs holds when the pool holds exactly the given machines, those in down with admin
// state Down and the others None or unset.
func adminStateIs(e *framework.Env, machines []framework.Machine, down ...string) framework.Condition {
	return func(ctx context.Context) (bool, error) {
		for _, lb := range adminStateLBs {
			pool, err := adminStatePool(ctx, e, lb)
			if err != nil {
				return false, err
			}
			if len(pool) != len(machines) {
				return false, fmt.Errorf("%s pool %v, want %d entries", lb, pool, len(machines))
			}
			for _, m := range machines {
				st, ok := pool[m.InternalIPs[0]]
				wantDown := false
				for _, d := range down {
					wantDown = wantDown || d == m.NodeName
				}
				if !ok || (st == "Down") != wantDown {
					return false, fmt.Errorf("%s pool %v; want Down only for %v", lb, pool, down)
				}
			}
		}
		return true, nil
	}
}

func adminStateSetTaints(t *testing.T, e *framework.Env, name string, edit func([]corev1.Taint) []corev1.Taint) {
	t.Helper()
	e.WaitFor("taints of "+name+" updated", func(ctx context.Context) (bool, error) {
		n, err := e.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		n.Spec.Taints = edit(n.Spec.Taints)
		_, err = e.Kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err == nil, err
	}, 30*time.Second)
}

// adminStateShutDown stands in for a VM that was shut down: its node goes NotReady (kwok stops
// playing its kubelet) and gets the out-of-service taint. On a Ready node the taint would not
// last: the node-out-of-service controller removes it there, as the existing provider does.
func adminStateShutDown(t *testing.T, e *framework.Env, name string) {
	t.Helper()
	e.WaitFor("node "+name+" NotReady", framework.NodeNotReady(e.Kube, name), 30*time.Second)
	adminStateSetTaints(t, e, name, addTaint(adminStateOOS))
}

// adminStateBackInService removes the out-of-service taint and makes the node Ready again.
func adminStateBackInService(t *testing.T, e *framework.Env, name string) {
	t.Helper()
	adminStateSetTaints(t, e, name, dropTaint(planner.TaintOutOfService))
	e.WaitFor("node "+name+" Ready", framework.NodeReady(e.Kube, name), time.Minute)
}

var adminStateOOS = corev1.Taint{Key: planner.TaintOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}

func addTaint(t corev1.Taint) func([]corev1.Taint) []corev1.Taint {
	return func(ts []corev1.Taint) []corev1.Taint { return append(ts, t) }
}

func dropTaint(key string) func([]corev1.Taint) []corev1.Taint {
	return func(ts []corev1.Taint) []corev1.Taint {
		var out []corev1.Taint
		for _, x := range ts {
			if x.Key != key {
				out = append(out, x)
			}
		}
		return out
	}
}

// adminStateMetric reads one sample of the CCM's /metrics (0 when absent).
func adminStateMetric(ctx context.Context, e *framework.Env, series string) (float64, error) {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", e.CCMPort()), nil)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return 0, nil
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

func adminStatePoolWrites(t *testing.T, e *framework.Env) int64 {
	t.Helper()
	st, err := e.Azsim.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.Writes("backendAddressPools")
}

func adminStateNodeEvent(e *framework.Env, node, reason string) framework.Condition {
	return func(ctx context.Context) (bool, error) {
		evs, err := e.Kube.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ev := range evs.Items {
			if ev.InvolvedObject.Kind == "Node" && ev.InvolvedObject.Name == node && ev.Reason == reason {
				return true, nil
			}
		}
		return false, fmt.Errorf("no %s event on node %s", reason, node)
	}
}

// TestAdminState: a public and an internal LoadBalancer service on IP-based (nodeIP) pools;
// draining nodes' backend entries go admin state Down on both load balancers and come back
// None.
func TestAdminState(t *testing.T) {
	working(t)
	nodesRequireBinary(t, framework.CCMBinaryName)
	e := framework.Start(t, framework.Options{CloudConfig: map[string]any{"loadBalancerBackendPoolConfigurationType": "nodeIP"}})
	machines := e.Machines
	if len(machines) < 3 {
		t.Fatalf("want 3 machines, have %d", len(machines))
	}
	e.CreateNodes(framework.NodeOptions{ProviderID: true}, machines...)
	e.StartCCM()
	for _, m := range machines {
		e.WaitFor("node "+m.NodeName+" initialized", e.NodeInitialized(m.NodeName), 2*time.Minute)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}}}
	if _, err := e.Kube.CoreV1().Services("default").Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	internal := svc.DeepCopy()
	internal.Name, internal.Annotations = "web-internal", map[string]string{"service.beta.kubernetes.io/azure-load-balancer-internal": "true"}
	if _, err := e.Kube.CoreV1().Services("default").Create(context.Background(), internal, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.WaitFor("service ingress", e.ServiceIngress("default", "web"), 2*time.Minute)
	e.WaitFor("internal service ingress", e.ServiceIngress("default", "web-internal"), 2*time.Minute)
	e.WaitFor("pool holds every node, all None", adminStateIs(e, machines), time.Minute)
	n0, n1, n2 := machines[0].NodeName, machines[1].NodeName, machines[2].NodeName

	t.Run("taint Down, others None; untaint None; cordon alone nothing", func(t *testing.T) {
		adminStateShutDown(t, e, n0)
		e.WaitFor(n0+" Down", adminStateIs(e, machines, n0), 30*time.Second)
		e.WaitFor("AdminStateDown event", adminStateNodeEvent(e, n0, "AdminStateDown"), 30*time.Second)
		adminStateBackInService(t, e, n0)
		e.WaitFor(n0+" None", adminStateIs(e, machines), 30*time.Second)
		e.WaitFor("AdminStateRestored event", adminStateNodeEvent(e, n0, "AdminStateRestored"), 30*time.Second)
		before := adminStatePoolWrites(t, e)
		adminStateSetTaints(t, e, n1, addTaint(corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}))
		// A later taint on another node proves the cordon was seen and ignored.
		adminStateShutDown(t, e, n2)
		e.WaitFor(n2+" Down", adminStateIs(e, machines, n2), 30*time.Second)
		if got := adminStatePoolWrites(t, e) - before; got != int64(len(adminStateLBs)) {
			t.Errorf("%d pool writes for a cordon and one taint, want one per load balancer (%d)", got, len(adminStateLBs))
		}
		adminStateSetTaints(t, e, n1, dropTaint(corev1.TaintNodeUnschedulable))
		adminStateBackInService(t, e, n2)
		e.WaitFor("all None", adminStateIs(e, machines), 30*time.Second)
	})

	t.Run("service update while draining keeps Down", func(t *testing.T) {
		adminStateShutDown(t, e, n1)
		e.WaitFor(n1+" Down", adminStateIs(e, machines, n1), 30*time.Second)
		e.WaitFor("service updated", func(ctx context.Context) (bool, error) {
			s, err := e.Kube.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443), Protocol: corev1.ProtocolTCP})
			_, err = e.Kube.CoreV1().Services("default").Update(ctx, s, metav1.UpdateOptions{})
			return err == nil, err
		}, 30*time.Second)
		e.WaitFor("rule for 443 on the load balancer", func(ctx context.Context) (bool, error) {
			lb, err := e.Azsim.Get(ctx, fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/loadBalancers/kubernetes",
				e.Azure.SubscriptionID, e.Azure.ResourceGroup))
			if err != nil {
				return false, err
			}
			props, _ := lb["properties"].(map[string]any)
			for _, r := range props["loadBalancingRules"].([]any) {
				if strings.HasSuffix(r.(map[string]any)["name"].(string), "-TCP-443") {
					return true, nil
				}
			}
			return false, fmt.Errorf("no 443 rule yet")
		}, time.Minute)
		if ok, err := adminStateIs(e, machines, n1)(context.Background()); !ok {
			t.Fatalf("after the service update: %v", err)
		}
	})

	t.Run("CCM restart while tainted keeps Down", func(t *testing.T) {
		before := adminStatePoolWrites(t, e)
		e.RestartCCM()
		// The new process sees the tainted node, checks the pool and finds it already Down.
		e.WaitFor("restarted CCM checked the pool", func(ctx context.Context) (bool, error) {
			d, err := adminStateMetric(ctx, e, "loadbalancer_adminstate_draining_nodes")
			if err != nil {
				return false, err
			}
			u, err := adminStateMetric(ctx, e, `loadbalancer_adminstate_operations_total{operation="update_pool",result="unchanged"}`)
			return err == nil && d == 1 && u >= 1, fmt.Errorf("draining_nodes %v, unchanged rounds %v (%v)", d, u, err)
		}, time.Minute)
		if ok, err := adminStateIs(e, machines, n1)(context.Background()); !ok {
			t.Fatalf("after restart: %v", err)
		}
		if got := adminStatePoolWrites(t, e) - before; got != 0 {
			t.Errorf("%d pool writes across the restart, want 0", got)
		}
		adminStateBackInService(t, e, n1)
		e.WaitFor("all None after restart", adminStateIs(e, machines), 30*time.Second)
	})

	t.Run("PreemptScheduled taints once, duplicates ignored", func(t *testing.T) {
		ctx := context.Background()
		node, err := e.Kube.CoreV1().Nodes().Get(ctx, n2, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			now := metav1.Now()
			ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("%s.preempt%d", n2, i)},
				InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: n2, UID: node.UID},
				Reason:         "PreemptScheduled", Type: corev1.EventTypeWarning, Message: "Spot VM will be preempted",
				FirstTimestamp: now, LastTimestamp: now, Count: 1, Source: corev1.EventSource{Component: "e2e"}}
			if _, err := e.Kube.CoreV1().Events("default").Create(ctx, ev, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				e.WaitFor(n2+" Down after PreemptScheduled", adminStateIs(e, machines, n2), 30*time.Second)
			}
		}
		e.WaitFor("duplicates counted", func(ctx context.Context) (bool, error) {
			v, err := adminStateMetric(ctx, e, `loadbalancer_adminstate_preempt_events_total{result="duplicate"}`)
			return err == nil && v >= 2, fmt.Errorf("duplicates %v (%v)", v, err)
		}, 30*time.Second)
		tainted, _ := adminStateMetric(ctx, e, `loadbalancer_adminstate_preempt_events_total{result="tainted"}`)
		if tainted != 1 {
			t.Errorf("tainted %v times, want 1", tainted)
		}
		node, _ = e.Kube.CoreV1().Nodes().Get(ctx, n2, metav1.GetOptions{})
		count := 0
		for _, tn := range node.Spec.Taints {
			if tn.Key == planner.TaintDraining && tn.Value == planner.TaintDrainingSpotEviction {
				count++
			}
		}
		if count != 1 {
			t.Errorf("%d draining taints: %v", count, node.Spec.Taints)
		}
		adminStateSetTaints(t, e, n2, dropTaint(planner.TaintDraining))
		e.WaitFor("all None", adminStateIs(e, machines), 30*time.Second)
	})

	t.Run("injected ARM failure is retried until it succeeds", func(t *testing.T) {
		ctx := context.Background()
		// 409 AnotherOperationInProgress: not retried by the SDK pipeline, so the controller's
		// own backoff must bring the node Down.
		f, err := e.Azsim.AddFault(ctx, middleware.Fault{Kind: middleware.FaultConflict, Class: middleware.Write, ResourceType: "backendAddressPools", Count: 2})
		if err != nil {
			t.Fatal(err)
		}
		adminStateShutDown(t, e, n0)
		e.WaitFor(n0+" Down despite failures", adminStateIs(e, machines, n0), time.Minute)
		e.WaitFor("AdminStateFailed event", adminStateNodeEvent(e, n0, "AdminStateFailed"), 30*time.Second)
		faults, err := e.Azsim.Faults(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range faults {
			if x.ID == f.ID && x.Hits != 2 {
				t.Errorf("fault hit %d times, want 2", x.Hits)
			}
		}
		if v, err := adminStateMetric(ctx, e, `loadbalancer_adminstate_errors_total{operation="update_pool",status="409"}`); err != nil || v != 2 {
			t.Errorf("errors_total{409} = %v (%v), want 2", v, err)
		}
	})

	t.Run("node deleted while tainted: no admin-state call; same-name replacement starts None", func(t *testing.T) {
		ctx := context.Background()
		series := `loadbalancer_adminstate_operations_total{operation="update_pool",result="success"}`
		before, err := adminStateMetric(ctx, e, series)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Kube.CoreV1().Nodes().Delete(ctx, n0, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		e.WaitFor("entry of "+n0+" removed by pool reconciliation", adminStateIs(e, machines[1:]), 2*time.Minute)
		e.CreateNodes(framework.NodeOptions{ProviderID: true}, machines[0])
		e.WaitFor("replacement initialized", e.NodeInitialized(n0), 2*time.Minute)
		e.WaitFor("replacement back in the pool, None", adminStateIs(e, machines), 2*time.Minute)
		after, err := adminStateMetric(ctx, e, series)
		if err != nil {
			t.Fatal(err)
		}
		if after != before {
			t.Errorf("admin-state pool updates %v -> %v across the deletion and replacement, want none", before, after)
		}
	})
}

// TestAdminStateDisabled: enableLoadBalancerAdminState=false keeps the controller off (it is
// never built: its metrics are not even registered).
func TestAdminStateDisabled(t *testing.T) {
	working(t)
	nodesRequireBinary(t, framework.CCMBinaryName)
	e := framework.Start(t, framework.Options{CloudConfig: map[string]any{"loadBalancerBackendPoolConfigurationType": "nodeIP", "enableLoadBalancerAdminState": false}})
	e.CreateNodes(framework.NodeOptions{ProviderID: true}, e.Machines...)
	e.StartCCM()
	e.WaitFor("controller reported disabled", func(context.Context) (bool, error) {
		b, err := os.ReadFile(e.CCMLogPath())
		return err == nil && strings.Contains(string(b), "enableLoadBalancerAdminState=false"), err
	}, time.Minute)
	e.WaitFor("CCM metrics without admin-state series", func(ctx context.Context) (bool, error) {
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		resp, err := hc.Get(fmt.Sprintf("https://127.0.0.1:%d/metrics", e.CCMPort()))
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			return false, fmt.Errorf("status %d: %v", resp.StatusCode, err)
		}
		if strings.Contains(string(body), "loadbalancer_adminstate_") {
			t.Fatal("admin-state metrics registered although the controller is disabled")
		}
		return true, nil
	}, time.Minute)
}

// adminStateNICPool reads a NIC-based pool: its member IP configurations and the admin state
// of the address entries that reference them (lower-cased IDs).
func adminStateNICPool(ctx context.Context, e *framework.Env, lb string) (members []string, states map[string]string, err error) {
	id := fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/loadBalancers/%s/backendAddressPools/kubernetes",
		e.Azure.SubscriptionID, e.Azure.ResourceGroup, lb)
	doc, err := e.Azsim.Get(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	states = map[string]string{}
	props, _ := doc["properties"].(map[string]any)
	cfgs, _ := props["backendIPConfigurations"].([]any)
	for _, c := range cfgs {
		if cid, _ := c.(map[string]any)["id"].(string); cid != "" {
			members = append(members, strings.ToLower(cid))
		}
	}
	addrs, _ := props["loadBalancerBackendAddresses"].([]any)
	for _, a := range addrs {
		ap, _ := a.(map[string]any)["properties"].(map[string]any)
		ref, _ := ap["networkInterfaceIPConfiguration"].(map[string]any)
		rid, _ := ref["id"].(string)
		st, _ := ap["adminState"].(string)
		if rid != "" {
			states[strings.ToLower(rid)] = st
		}
	}
	return members, states, nil
}

// adminStateNICIs holds when every machine is a member of the NIC-based pool and exactly the
// IP configurations of the machines in down carry Down.
func adminStateNICIs(e *framework.Env, machines []framework.Machine, down ...string) framework.Condition {
	return func(ctx context.Context) (bool, error) {
		members, states, err := adminStateNICPool(ctx, e, "kubernetes")
		if err != nil {
			return false, err
		}
		for _, m := range machines {
			prefix := strings.ToLower(strings.TrimPrefix(m.ProviderID, "azure://")) + "/networkinterfaces/"
			var mine []string
			for _, id := range members {
				if strings.HasPrefix(id, prefix) {
					mine = append(mine, id)
				}
			}
			if len(mine) == 0 {
				return false, fmt.Errorf("%s not a member of the pool yet (%v)", m.NodeName, members)
			}
			wantDown := slices.Contains(down, m.NodeName)
			for _, id := range mine {
				if (states[id] == "Down") != wantDown {
					return false, fmt.Errorf("%s: %s admin state %q; want Down only for %v", m.NodeName, id, states[id], down)
				}
			}
		}
		return true, nil
	}
}

// TestAdminStateNICPools: NIC-based (nodeIPConfiguration) pools, whose membership lives on the
// scale set NICs: admin state is set after creation on address entries referencing the
// members' IP configurations.
func TestAdminStateNICPools(t *testing.T) {
	working(t)
	nodesRequireBinary(t, framework.CCMBinaryName)
	e := framework.Start(t, framework.Options{})
	machines := e.Machines
	e.CreateNodes(framework.NodeOptions{ProviderID: true}, machines...)
	e.StartCCM()
	for _, m := range machines {
		e.WaitFor("node "+m.NodeName+" initialized", e.NodeInitialized(m.NodeName), 2*time.Minute)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}}}
	if _, err := e.Kube.CoreV1().Services("default").Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.WaitFor("service ingress", e.ServiceIngress("default", "web"), 2*time.Minute)
	e.WaitFor("every node a member, none Down", adminStateNICIs(e, machines), 2*time.Minute)
	n0 := machines[0].NodeName
	adminStateShutDown(t, e, n0)
	e.WaitFor(n0+" Down", adminStateNICIs(e, machines, n0), 30*time.Second)
	adminStateBackInService(t, e, n0)
	e.WaitFor(n0+" None", adminStateNICIs(e, machines), 30*time.Second)
}
