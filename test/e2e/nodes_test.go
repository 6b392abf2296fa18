package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/internal/azsim/control"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	"github.com/azure-ccm/azure-ccm/internal/nodes"
	"github.com/azure-ccm/azure-ccm/test/framework"
	"github.com/azure-ccm/azure-ccm/test/framework/azurenames"
)

// nodesTopology is the framework's default estate (zonal Uniform scale set pool0) plus an
// availability set, a Flexible scale set and a VM in another resource group.
func nodesTopology(poolSize int) *topology.Topology {
	t := framework.DefaultTopology()
	t.ScaleSets[0].Capacity = poolSize
	// IMDS of its VMs shows a sub fault domain and an interconnect group tag: the node manager
	// turns them into labels.
	t.ScaleSets[0].SubFaultDomain = "2"
	t.ScaleSets[0].Tags = map[string]string{"Platform_Interconnect_Group": "ig-7"}
	t.ScaleSets = append(t.ScaleSets, topology.ScaleSet{ResourceGroup: "rg-cluster", Name: "flex0", Orchestration: "Flexible", Capacity: 2, FaultDomains: 2})
	t.AvailabilitySets = []topology.AvailabilitySet{{ResourceGroup: "rg-cluster", Name: "as0", VMs: 2}}
	t.VirtualMachines = []topology.VirtualMachine{{ResourceGroup: "rg-other", Name: "other-vm", Zone: "3"}}
	return t
}

// nodesCloudConfig keeps the VM caches short so that lifecycle changes are seen quickly.
var nodesCloudConfig = map[string]any{
	"vmCacheTTLInSeconds":                  2,
	"vmssVirtualMachinesCacheTTLInSeconds": 2,
}

func nodesRequireBinary(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(framework.BinDir(), name)
	if _, err := os.Stat(p); err != nil {
		if framework.InCI() {
			t.Fatalf("%s not built (make build): %v", p, err)
		}
		t.Skipf("%s not built (make build)", p)
	}
	return p
}

// nodesCreate registers a node like a kubelet with --cloud-provider=external would.
func nodesCreate(t *testing.T, e *framework.Env, m framework.Machine, podCIDR string, labels map[string]string) {
	t.Helper()
	n := framework.NewNode(m, framework.NodeOptions{Labels: labels})
	if podCIDR != "" {
		n.Spec.PodCIDR, n.Spec.PodCIDRs = podCIDR, []string{podCIDR}
	}
	if _, err := e.Kube.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func nodesGet(ctx context.Context, e *framework.Env, name string) (*corev1.Node, error) {
	return e.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

func nodesHasTaintEffect(n *corev1.Node, key string, effect corev1.TaintEffect) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key && t.Effect == effect {
			return true
		}
	}
	return false
}

func nodesHasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// nodesInitialized holds when the node carries what the machine says.
func nodesInitialized(e *framework.Env, m framework.Machine) framework.Condition {
	return func(ctx context.Context) (bool, error) {
		n, err := nodesGet(ctx, e, m.NodeName)
		if err != nil {
			return false, err
		}
		wantZone := fmt.Sprint(m.FaultDomain)
		if m.Zone != "" {
			wantZone = m.Region + "-" + m.Zone
		}
		switch {
		case nodesHasTaint(n, nodes.TaintUninitialized):
			return false, fmt.Errorf("%s still tainted uninitialized", m.NodeName)
		case !strings.EqualFold(n.Spec.ProviderID, m.ProviderID):
			return false, fmt.Errorf("%s providerID %q want %q", m.NodeName, n.Spec.ProviderID, m.ProviderID)
		case n.Labels[corev1.LabelTopologyZone] != wantZone || n.Labels[corev1.LabelTopologyRegion] != m.Region:
			return false, fmt.Errorf("%s zone/region %q/%q want %q/%q", m.NodeName, n.Labels[corev1.LabelTopologyZone], n.Labels[corev1.LabelTopologyRegion], wantZone, m.Region)
		case n.Labels[corev1.LabelInstanceTypeStable] != m.VMSize:
			return false, fmt.Errorf("%s instance type %q want %q", m.NodeName, n.Labels[corev1.LabelInstanceTypeStable], m.VMSize)
		}
		internal := ""
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP && internal == "" {
				internal = a.Address
			}
		}
		if internal != m.InternalIPs[0] {
			return false, fmt.Errorf("%s InternalIP %q want %q", m.NodeName, internal, m.InternalIPs[0])
		}
		return true, nil
	}
}

// nodesMakeNotReady stops kwok from playing the node's kubelet and marks it NotReady, as a
// stopped VM's node would become; the cloud-node-lifecycle controller only looks at those.
func nodesMakeNotReady(t *testing.T, e *framework.Env, name string) {
	t.Helper()
	e.WaitFor("node "+name+" marked NotReady", func(ctx context.Context) (bool, error) {
		return nodesSetNotReady(ctx, e, name)
	}, 30*time.Second)
}

// nodesSetNotReady: framework.NodeNotReady as a function of the env.
func nodesSetNotReady(ctx context.Context, e *framework.Env, name string) (bool, error) {
	return framework.NodeNotReady(e.Kube, name)(ctx)
}

// nodesRouteTable returns the route names in azsim's route table.
func nodesRouteTable(ctx context.Context, e *framework.Env) ([]string, error) {
	a := e.Azure
	rt, err := e.Azsim.Get(ctx, "/subscriptions/"+a.SubscriptionID+"/resourceGroups/"+a.ResourceGroup+"/providers/Microsoft.Network/routeTables/"+a.RouteTableName)
	if err != nil {
		return nil, err
	}
	props, _ := rt["properties"].(map[string]any)
	list, _ := props["routes"].([]any)
	var names []string
	for _, r := range list {
		if m, ok := r.(map[string]any); ok {
			names = append(names, fmt.Sprint(m["name"]))
		}
	}
	return names, nil
}

func nodesByKind(ms []framework.Machine) (uniform, flex, avset []framework.Machine, other framework.Machine) {
	for _, m := range ms {
		switch {
		case m.ResourceGroup == "rg-other":
			other = m
		case m.ScaleSet == "pool0":
			uniform = append(uniform, m)
		case m.ScaleSet == "flex0":
			flex = append(flex, m)
		case m.AvailabilitySet != "":
			avset = append(avset, m)
		}
	}
	return
}

func TestNodes(t *testing.T) {
	working(t)
	ccm := nodesRequireBinary(t, framework.CCMBinaryName)
	nodeManager := nodesRequireBinary(t, "azure-cloud-node-manager")
	e := framework.Start(t, framework.Options{Topology: nodesTopology(3), CloudConfig: nodesCloudConfig, CCMBinary: ccm})
	uniform, flex, avset, other := nodesByKind(e.Machines)
	if len(uniform) != 3 || len(flex) != 2 || len(avset) != 2 || other.NodeName == "" {
		t.Fatalf("unexpected machines: %+v", e.Machines)
	}

	// 1. Before any CCM runs: the node manager initialises its node from azsim's IMDS.
	t.Run("node manager initialises its node from IMDS", func(t *testing.T) {
		m := uniform[2]
		nodesCreate(t, e, m, "", nil)
		e.Azure.Server.IMDS().SetDefaultVM(m.NodeName)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, nodeManager, "--kubeconfig="+e.Kubeconfig, "--node-name="+m.NodeName,
			"--imds-endpoint="+e.Azure.IMDSURL, "--once").CombinedOutput()
		if err != nil {
			t.Fatalf("node manager: %v\n%s", err, out)
		}
		e.WaitFor("node manager initialised "+m.NodeName, nodesInitialized(e, m), 30*time.Second)
		n, err := nodesGet(ctx, e, m.NodeName)
		if err != nil {
			t.Fatal(err)
		}
		// The existing node manager's label keys, written out here rather than taken from the code.
		for key, want := range map[string]string{"topology.kubernetes.azure.com/sub-fault-domain": "2",
			"topology.kubernetes.azure.com/interconnect-group": "ig-7"} {
			if got := n.Labels[key]; got != want {
				t.Errorf("label %s = %q, want %q (labels %v)", key, got, want, n.Labels)
			}
		}
	})

	// 2. The CCM with the node, node lifecycle and route controllers.
	e.StartCCM("--controllers=cloud-node,cloud-node-lifecycle,route,node-out-of-service", "--configure-cloud-routes=true",
		"--cluster-cidr=10.244.0.0/16", "--route-reconciliation-period=2s", "--node-monitor-period=2s")

	podCIDR := map[string]string{}
	t.Run("nodes with the uninitialized taint are initialised", func(t *testing.T) {
		managed := append(append(append([]framework.Machine{}, uniform[:2]...), flex...), avset...)
		for i, m := range managed {
			podCIDR[m.NodeName] = fmt.Sprintf("10.244.%d.0/24", i)
			nodesCreate(t, e, m, podCIDR[m.NodeName], nil)
		}
		for _, m := range managed {
			e.WaitFor("CCM initialised "+m.NodeName, nodesInitialized(e, m), 90*time.Second)
		}
	})

	t.Run("cross resource group node", func(t *testing.T) {
		podCIDR[other.NodeName] = "10.244.50.0/24"
		nodesCreate(t, e, other, podCIDR[other.NodeName], map[string]string{nodes.LabelResourceGroup: other.ResourceGroup,
			nodes.LabelExcludeBalancerAlpha: "true"})
		e.WaitFor("CCM initialised cross-RG "+other.NodeName, nodesInitialized(e, other), 90*time.Second)
	})

	t.Run("on-prem node", func(t *testing.T) {
		onprem := framework.Machine{NodeName: "onprem-1", InternalIPs: []string{"192.168.1.10"}}
		nodesCreate(t, e, onprem, "10.244.60.0/24", map[string]string{nodes.LabelManaged: "false"})
		e.WaitFor("on-prem node initialised", func(ctx context.Context) (bool, error) {
			n, err := nodesGet(ctx, e, onprem.NodeName)
			if err != nil {
				return false, err
			}
			if nodesHasTaint(n, nodes.TaintUninitialized) || n.Spec.ProviderID != "azure://onprem-1" {
				return false, fmt.Errorf("providerID %q taints %v", n.Spec.ProviderID, n.Spec.Taints)
			}
			return true, nil
		}, 90*time.Second)
		// It exists forever, even NotReady, and gets no route in Azure.
		nodesMakeNotReady(t, e, onprem.NodeName)
	})

	t.Run("routes appear for every managed node's pod CIDR", func(t *testing.T) {
		var want []string
		for name, cidr := range podCIDR {
			want = append(want, azurenames.RouteName(name, cidr))
		}
		e.WaitFor("routes in azsim", func(ctx context.Context) (bool, error) {
			names, err := nodesRouteTable(ctx, e)
			if err != nil {
				return false, err
			}
			have := strings.Join(names, ",")
			for _, w := range want {
				if !strings.Contains(have, w) {
					return false, fmt.Errorf("route %s missing (have %s)", w, have)
				}
			}
			if strings.Contains(have, "onprem-1") {
				return false, fmt.Errorf("on-prem route written to Azure: %s", have)
			}
			return true, nil
		}, 90*time.Second)
	})

	t.Run("deallocated VM gets the shutdown taint", func(t *testing.T) {
		for _, m := range []framework.Machine{uniform[0], avset[0]} {
			if err := e.Azure.Server.VMAction(context.Background(), control.VMAction{ID: m.ResourceID, Action: "deallocate"}); err != nil {
				t.Fatal(err)
			}
			nodesMakeNotReady(t, e, m.NodeName)
		}
		for _, m := range []framework.Machine{uniform[0], avset[0]} {
			e.WaitFor("shutdown taint on "+m.NodeName, func(ctx context.Context) (bool, error) {
				n, err := nodesGet(ctx, e, m.NodeName)
				if err != nil {
					return false, err
				}
				if !nodesHasTaint(n, "node.cloudprovider.kubernetes.io/shutdown") {
					_, _ = nodesSetNotReady(ctx, e, m.NodeName)
					return false, fmt.Errorf("taints %v", n.Spec.Taints)
				}
				return true, nil
			}, 90*time.Second)
		}
	})

	// As the existing provider does: a NotReady node with the shutdown taint gets the
	// out-of-service taint, so Kubernetes' non-graceful shutdown handling moves its pods; it
	// goes when the node is Ready again.
	t.Run("shut-down node gets the out-of-service taint until it is Ready", func(t *testing.T) {
		for _, m := range []framework.Machine{uniform[0], avset[0]} {
			e.WaitFor("out-of-service taint on "+m.NodeName, func(ctx context.Context) (bool, error) {
				n, err := nodesGet(ctx, e, m.NodeName)
				if err != nil {
					return false, err
				}
				if !nodesHasTaintEffect(n, corev1.TaintNodeOutOfService, corev1.TaintEffectNoExecute) {
					_, _ = nodesSetNotReady(ctx, e, m.NodeName)
					return false, fmt.Errorf("taints %v", n.Spec.Taints)
				}
				return true, nil
			}, 90*time.Second)
		}
		// The VM starts and its kubelet reports the node Ready again.
		m := avset[0]
		if err := e.Azure.Server.VMAction(context.Background(), control.VMAction{ID: m.ResourceID, Action: "start"}); err != nil {
			t.Fatal(err)
		}
		e.WaitFor("node "+m.NodeName+" Ready", framework.NodeReady(e.Kube, m.NodeName), time.Minute)
		e.WaitFor("node "+m.NodeName+" without the out-of-service taint", func(ctx context.Context) (bool, error) {
			n, err := nodesGet(ctx, e, m.NodeName)
			if err != nil {
				return false, err
			}
			if nodesHasTaint(n, corev1.TaintNodeOutOfService) {
				return false, fmt.Errorf("taints %v, conditions %v", n.Spec.Taints, n.Status.Conditions)
			}
			return true, nil
		}, 90*time.Second)
		// The node still shut down keeps it.
		n, err := nodesGet(context.Background(), e, uniform[0].NodeName)
		if err != nil {
			t.Fatal(err)
		}
		if !nodesHasTaint(n, corev1.TaintNodeOutOfService) {
			t.Errorf("node %s lost the out-of-service taint while shut down: %v", uniform[0].NodeName, n.Spec.Taints)
		}
	})

	t.Run("CCM serves healthz and the ARM metrics", func(t *testing.T) {
		// The CCM's serving certificate is self-signed.
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		base := fmt.Sprintf("https://127.0.0.1:%d", e.CCMPort())
		e.WaitFor("healthz and ARM metrics", func(ctx context.Context) (bool, error) {
			for path, want := range map[string]string{"/healthz": "ok", "/metrics": `azure_ccm_arm_requests_total{operation="list",resource_type="virtualMachineScaleSets/virtualMachines",result="success"}`} {
				resp, err := hc.Get(base + path)
				if err != nil {
					return false, err
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if !strings.Contains(string(body), want) {
					return false, fmt.Errorf("%s lacks %s", path, want)
				}
			}
			return true, nil
		}, 30*time.Second)
	})

	t.Run("deleted VM: node and its route go away", func(t *testing.T) {
		m := flex[0]
		if err := e.Azure.Server.VMAction(context.Background(), control.VMAction{ID: m.ResourceID, Action: "delete"}); err != nil {
			t.Fatal(err)
		}
		nodesMakeNotReady(t, e, m.NodeName)
		e.WaitFor("node "+m.NodeName+" deleted", func(ctx context.Context) (bool, error) {
			_, err := nodesGet(ctx, e, m.NodeName)
			if err == nil {
				_, _ = nodesSetNotReady(ctx, e, m.NodeName)
				return false, fmt.Errorf("node still exists")
			}
			return true, nil
		}, 90*time.Second)
		gone := azurenames.RouteName(m.NodeName, podCIDR[m.NodeName])
		e.WaitFor("route "+gone+" removed", func(ctx context.Context) (bool, error) {
			names, err := nodesRouteTable(ctx, e)
			if err != nil {
				return false, err
			}
			for _, n := range names {
				if n == gone {
					return false, fmt.Errorf("route still present")
				}
			}
			return true, nil
		}, 90*time.Second)
		// The on-prem node, NotReady all along, still exists.
		if _, err := nodesGet(context.Background(), e, "onprem-1"); err != nil {
			t.Errorf("on-prem node deleted: %v", err)
		}
	})
}

// Initialising 200 nodes of one scale set costs a constant number of ARM reads (list-based
// caches), measured with azsim's counters.
func TestNodesInitialize200ScaleSetNodes(t *testing.T) {
	working(t)
	ccm := nodesRequireBinary(t, framework.CCMBinaryName)
	const n = 200
	topo := framework.DefaultTopology()
	topo.ScaleSets[0].Capacity = n
	e := framework.Start(t, framework.Options{Topology: topo, CCMBinary: ccm})
	// Count only what the CCM sends (seeding reads machines back).
	e.Azure.Server.Middleware().ResetStats()
	e.StartCCM("--controllers=cloud-node", "--concurrent-node-syncs=10")
	if _, err := framework.CreateNodes(context.Background(), e.Kube, framework.NodeOptions{}, e.Machines...); err != nil {
		t.Fatal(err)
	}
	e.WaitFor(fmt.Sprintf("%d nodes initialised", n), func(ctx context.Context) (bool, error) {
		list, err := e.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		done := 0
		for i := range list.Items {
			if list.Items[i].Spec.ProviderID != "" && !nodesHasTaint(&list.Items[i], nodes.TaintUninitialized) {
				done++
			}
		}
		if done < n {
			return false, fmt.Errorf("%d/%d initialised", done, n)
		}
		return true, nil
	}, 5*time.Minute)
	for _, m := range e.Machines[:5] {
		e.WaitFor("node "+m.NodeName+" correct", nodesInitialized(e, m), 10*time.Second)
	}
	var reads int64
	var report strings.Builder
	for _, c := range e.Azure.Server.Middleware().Stats().Requests {
		fmt.Fprintf(&report, "%s %s %d: %d\n", c.Method, c.ResourceType, c.Status, c.Count)
		if c.Method == "GET" && (strings.Contains(c.ResourceType, "virtualMachine") || strings.Contains(c.ResourceType, "networkInterfaces")) {
			reads += c.Count
		}
	}
	t.Logf("azsim requests after initialising %d nodes:\n%s", n, report.String())
	if reads > 20 {
		t.Fatalf("%d VM/NIC reads for %d nodes: want a constant number of LISTs, not one GET per node", reads, n)
	}
}
