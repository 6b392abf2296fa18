package e2e

import (
	"context"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/azure-ccm/azure-ccm/internal/azsim/client"
	sgcontroller "github.com/azure-ccm/azure-ccm/internal/controllers/servicegateway"
	"github.com/azure-ccm/azure-ccm/internal/servicegateway/admission"
	"github.com/azure-ccm/azure-ccm/test/framework"
	"github.com/azure-ccm/azure-ccm/test/framework/azurenames"
)

// sgCloudConfig turns container-based load balancing on (the three keys go together). The
// admin-state controller works on node-based pools only and is switched off.
var sgCloudConfig = map[string]any{
	"serviceGatewayEnabled":                    true,
	"loadBalancerBackendPoolConfigurationType": "podIP",
	"loadBalancerSku":                          "service",
	"enableLoadBalancerAdminState":             false,
}

type sgEnv struct {
	*framework.Env
	t   *testing.T
	net *armnetwork.ClientFactory
	rg  string
}

// sgStart brings up the cluster with four nodes (pod CIDRs of their own, so kwok gives
// every pod a distinct IP), the service gateway in azsim, and the CCM.
func sgStart(t *testing.T) *sgEnv {
	t.Helper()
	topo := framework.DefaultTopology()
	topo.ScaleSets[0].Capacity = 4
	e := framework.Start(t, framework.Options{Topology: topo, CloudConfig: sgCloudConfig})
	nodesRequireBinary(t, framework.CCMBinaryName)
	f, err := lbARMClient(e.Azure)
	if err != nil {
		t.Fatal(err)
	}
	s := &sgEnv{Env: e, t: t, net: f, rg: e.Azure.ResourceGroup}
	vnetID := fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/virtualNetworks/%s",
		e.Azure.SubscriptionID, e.Azure.VnetResourceGroup, e.Azure.VnetName)
	ctx := lbCtx(t)
	p, err := f.NewServiceGatewaysClient().BeginCreateOrUpdate(ctx, s.rg, azurenames.ServiceGatewayName, armnetwork.ServiceGateway{
		Location:   to.Ptr(e.Azure.Location),
		SKU:        &armnetwork.ServiceGatewaySKU{Name: to.Ptr(armnetwork.ServiceGatewaySKUNameStandard), Tier: to.Ptr(armnetwork.ServiceGatewaySKUTierRegional)},
		Properties: &armnetwork.ServiceGatewayPropertiesFormat{VirtualNetwork: &armnetwork.VirtualNetwork{ID: to.Ptr(vnetID)}}}, nil)
	if err == nil {
		_, err = p.PollUntilDone(ctx, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range e.Machines {
		nodesCreate(t, e, m, fmt.Sprintf("10.244.%d.0/24", i), nil)
	}
	e.StartCCM(sgControllersFlag(t, e))
	for _, m := range e.Machines {
		e.WaitFor("node "+m.NodeName+" initialized", e.NodeInitialized(m.NodeName), lbWait)
	}
	return s
}

// expected is the gateway content the cluster calls for, computed from Pods and Nodes (not
// from EndpointSlices, which the controller reads): "node/pod" → sorted services.
func (s *sgEnv) expected(ctx context.Context) (map[string]string, error) {
	nodes, err := s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	nodeIP := map[string]string{}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP && !strings.Contains(a.Address, ":") {
				nodeIP[n.Name] = a.Address
			}
		}
	}
	pods, err := s.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	svcs, err := s.Kube.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	want := map[string][]string{}
	for _, p := range pods.Items {
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		key := nodeIP[p.Spec.NodeName] + "/" + p.Status.PodIP
		ready := false
		for _, c := range p.Status.Conditions {
			ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
		}
		for _, svc := range svcs.Items {
			if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.DeletionTimestamp != nil || len(svc.Spec.Selector) == 0 {
				continue
			}
			if ready && labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(p.Labels)) {
				want[key] = append(want[key], azurenames.GatewayIdentity(svc.UID))
			}
		}
		if id, ok := admission.EgressIdentity(&p); ok && (p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodPending) {
			want[key] = append(want[key], id)
		}
	}
	out := map[string]string{}
	for k, v := range want {
		sort.Strings(v)
		out[k] = strings.Join(v, ",")
	}
	return out, nil
}

// actual is the gateway's address locations in azsim, in the same form.
func (s *sgEnv) actual(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	pager := s.net.NewServiceGatewaysClient().NewGetAddressLocationsPager(s.rg, azurenames.ServiceGatewayName, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, l := range page.Value {
			for _, a := range l.Addresses {
				var svcs []string
				for _, sv := range a.Services {
					svcs = append(svcs, *sv)
				}
				sort.Strings(svcs)
				out[*l.AddressLocation+"/"+*a.Address] = strings.Join(svcs, ",")
			}
		}
	}
	return out, nil
}

// gatewayServices is name → type of the gateway's services.
func (s *sgEnv) gatewayServices(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	pager := s.net.NewServiceGatewaysClient().NewGetServicesPager(s.rg, azurenames.ServiceGatewayName, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, sv := range page.Value {
			out[*sv.Name] = string(*sv.Properties.ServiceType)
		}
	}
	return out, nil
}

// inStep holds when the cluster has exactly addresses ready addresses and azsim's address
// locations equal them.
func (s *sgEnv) inStep(addresses int) framework.Condition {
	return func(ctx context.Context) (bool, error) {
		want, err := s.expected(ctx)
		if err != nil {
			return false, err
		}
		got, err := s.actual(ctx)
		if err != nil {
			return false, err
		}
		if len(want) != addresses {
			return false, fmt.Errorf("cluster has %d ready addresses, waiting for %d", len(want), addresses)
		}
		if !maps.Equal(want, got) {
			return false, fmt.Errorf("gateway differs from the cluster:\n want %v\n got  %v", want, got)
		}
		return true, nil
	}
}

func (s *sgEnv) deployment(name string, replicas int32, podLabels map[string]string) {
	s.t.Helper()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: appsv1.DeploymentSpec{
		Replicas: to.Ptr(replicas), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}}},
	}}
	d.Spec.Template.Labels["app"] = name
	if _, err := s.Kube.AppsV1().Deployments("default").Create(lbCtx(s.t), d, metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
}

func (s *sgEnv) scale(name string, replicas int32) {
	s.t.Helper()
	ctx := lbCtx(s.t)
	sc, err := s.Kube.AppsV1().Deployments("default").GetScale(ctx, name, metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	sc.Spec.Replicas = replicas
	if _, err := s.Kube.AppsV1().Deployments("default").UpdateScale(ctx, name, sc, metav1.UpdateOptions{}); err != nil {
		s.t.Fatal(err)
	}
}

func (s *sgEnv) service(name string, targetPort intstr.IntOrString) *corev1.Service {
	s.t.Helper()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name},
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: targetPort, Protocol: corev1.ProtocolTCP}}}}
	out, err := s.Kube.CoreV1().Services("default").Create(lbCtx(s.t), svc, metav1.CreateOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

// networkID is the ID of a network resource in the cluster resource group.
func (s *sgEnv) networkID(typ, name string) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/%s/%s", s.Azure.SubscriptionID, s.rg, typ, name)
}

func (s *sgEnv) exists(ctx context.Context, id string) bool {
	_, err := s.Azsim.Get(ctx, id)
	return err == nil
}

// resourcesOf holds when the registration, load balancer and public IP of a service's gateway
// identity exist (or, with gone, do not).
func (s *sgEnv) resourcesOf(identity string, gone bool) framework.Condition {
	return func(ctx context.Context) (bool, error) {
		svcs, err := s.gatewayServices(ctx)
		if err != nil {
			return false, err
		}
		_, reg := svcs[identity]
		lb := s.exists(ctx, s.networkID("loadBalancers", identity))
		pip := s.exists(ctx, s.networkID("publicIPAddresses", azurenames.GatewayPublicIPName(identity)))
		if gone == (reg || lb || pip) {
			return false, fmt.Errorf("registered %t, load balancer %t, public IP %t", reg, lb, pip)
		}
		return true, nil
	}
}

func TestServiceGateway(t *testing.T) {
	// Parallel with the other slow, mostly waiting tests (see doc.go).
	t.Parallel()
	s := sgStart(t)
	ctx := lbCtx(t)

	// Ready pods appear under their nodes' IPs; the Service gets the public IP.
	s.deployment("web", 3, map[string]string{})
	web := s.service("web", intstr.FromString("http")) // named target port, resolved from the EndpointSlices
	uid := azurenames.GatewayIdentity(web.UID)
	s.WaitFor("web ingress IP", s.ServiceIngress("default", "web"), lbWait)
	s.WaitFor("3 web pods in the gateway", s.inStep(3), lbWait)
	s.WaitFor("web resources", s.resourcesOf(uid, false), lbWait)
	lb, err := s.net.NewLoadBalancersClient().Get(ctx, s.rg, uid, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(*lb.SKU.Name) != azurenames.GatewayLBSKU || *lb.Properties.LoadBalancingRules[0].Properties.BackendPort != 8080 {
		t.Fatalf("load balancer: sku %s, rules %+v", *lb.SKU.Name, lb.Properties.LoadBalancingRules[0].Properties)
	}
	svc, _ := s.Kube.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
	if !slices.Contains(svc.Finalizers, sgcontroller.Finalizer) {
		t.Fatalf("finalizers = %v", svc.Finalizers)
	}

	t.Run("scale 3 → 30 → 0", func(t *testing.T) {
		s.scale("web", 30)
		s.WaitFor("30 web pods in the gateway", s.inStep(30), 3*lbWait)
		s.scale("web", 0)
		s.WaitFor("no web pod in the gateway", s.inStep(0), 3*lbWait)
	})

	t.Run("pods move between nodes", func(t *testing.T) {
		ctx := lbCtx(t)
		s.scale("web", 6)
		s.WaitFor("6 web pods", s.inStep(6), 2*lbWait)
		// Cordon one node and delete its pods: their replacements land elsewhere.
		pods, err := s.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil || len(pods.Items) == 0 {
			t.Fatalf("pods: %v", err)
		}
		victim := pods.Items[0].Spec.NodeName
		n, _ := s.Kube.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{})
		n.Spec.Unschedulable = true
		if _, err := s.Kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName == victim {
				_ = s.Kube.CoreV1().Pods("default").Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: to.Ptr(int64(0))})
			}
		}
		s.WaitFor("pods moved off "+victim, func(ctx context.Context) (bool, error) {
			got, err := s.actual(ctx)
			if err != nil {
				return false, err
			}
			for k := range got {
				if strings.HasPrefix(k, nodeInternalIP(n)+"/") {
					return false, fmt.Errorf("gateway still lists %s", k)
				}
			}
			return s.inStep(6)(ctx)
		}, 2*lbWait)
		n, _ = s.Kube.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{})
		n.Spec.Unschedulable = false
		if _, err := s.Kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("egress pods get a NAT gateway", func(t *testing.T) {
		s.deployment("egress", 2, map[string]string{admission.EgressLabel: "Egress1"})
		s.WaitFor("egress pods in the gateway", s.inStep(8), 2*lbWait)
		s.WaitFor("NAT gateway egress1", func(ctx context.Context) (bool, error) {
			nat, err := s.net.NewNatGatewaysClient().Get(ctx, s.rg, "egress1", nil)
			if err != nil {
				return false, err
			}
			svcs, err := s.gatewayServices(ctx)
			if err != nil {
				return false, err
			}
			return string(*nat.SKU.Name) == "StandardV2" && svcs["egress1"] == "Outbound", fmt.Errorf("services %v", svcs)
		}, lbWait)
	})

	t.Run("restart with changes made while down", func(t *testing.T) {
		ctx := lbCtx(t)
		if err := s.StopCCM(); err != nil {
			t.Fatal(err)
		}
		s.scale("web", 4)
		if err := s.Kube.AppsV1().Deployments("default").Delete(ctx, "egress", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		s.deployment("api", 2, map[string]string{})
		api := s.service("api", intstr.FromInt32(9000))
		s.WaitFor("cluster settled while the CCM is down", func(ctx context.Context) (bool, error) {
			pods, err := s.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app in (web,api,egress)"})
			if err != nil {
				return false, err
			}
			return len(pods.Items) == 6, fmt.Errorf("%d pods", len(pods.Items))
		}, lbWait)
		s.StartCCM(sgControllersFlag(t, s.Env))
		s.WaitFor("api ingress IP", s.ServiceIngress("default", "api"), lbWait)
		s.WaitFor("gateway in step after restart", s.inStep(6), 2*lbWait)
		s.WaitFor("api resources", s.resourcesOf(azurenames.GatewayIdentity(api.UID), false), lbWait)
		s.WaitFor("NAT gateway egress1 removed", func(ctx context.Context) (bool, error) {
			svcs, err := s.gatewayServices(ctx)
			if err != nil {
				return false, err
			}
			nat := s.exists(ctx, s.networkID("natGateways", "egress1"))
			pip := s.exists(ctx, s.networkID("publicIPAddresses", azurenames.GatewayPublicIPName("egress1")))
			_, reg := svcs["egress1"]
			return !nat && !pip && !reg, fmt.Errorf("NAT %t, PIP %t, registered %t", nat, pip, reg)
		}, lbWait)
	})

	t.Run("ARM failures are retried without losing an update", func(t *testing.T) {
		ctx := lbCtx(t)
		f, err := s.Azsim.AddFault(ctx, client.Fault{Kind: "error", Status: 500, PathContains: "updateAddressLocations", Count: 4})
		if err != nil {
			t.Fatal(err)
		}
		s.scale("web", 9)
		s.WaitFor("gateway in step through the faults", s.inStep(11), 3*lbWait)
		faults, err := s.Azsim.Faults(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range faults {
			if g.ID == f.ID && g.Hits < 1 {
				t.Fatalf("the fault was never hit: %+v", g)
			}
		}
	})

	t.Run("deleting the Service removes its resources", func(t *testing.T) {
		ctx := lbCtx(t)
		if err := s.Kube.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		s.WaitFor("web resources gone", s.resourcesOf(uid, true), 2*lbWait)
		s.WaitFor("web Service gone (finalizer released)", func(ctx context.Context) (bool, error) {
			_, err := s.Kube.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
			return apierrors.IsNotFound(err), err
		}, lbWait)
		s.WaitFor("gateway in step", s.inStep(2), lbWait)
	})
}

// sgControllersFlag switches off the controllers that work on node-based pools only (they
// refuse to start without the node-based load balancer implementation).
func sgControllersFlag(t *testing.T, e *framework.Env) string {
	t.Helper()
	out, _ := exec.Command(e.CCMBinary(), "--help").CombinedOutput()
	flag := "--controllers=*"
	for _, name := range []string{"admin-state", "local-pools"} {
		if strings.Contains(string(out), " "+name+",") {
			flag += ",-" + name
		}
	}
	return flag
}

func nodeInternalIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}
