package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/test/framework"
	"github.com/azure-ccm/azure-ccm/test/framework/azurenames"
)

const (
	rbacSelectedLB = "lb-ns"
	rbacLocalNS    = "rbac-ns"
	rbacLocalName  = "rbac-local"
)

// rbacMultiSLBConfig turns on multiple load balancers for TestRBAC: every node joins the default
// entry (its primary VM set); lb-ns takes only services of namespaces labelled rbac=ns that ask
// for it. The selector starts the CCM's namespace informer, the mode its local-pools controller.
var rbacMultiSLBConfig = map[string]any{
	"multipleStandardLoadBalancerConfigurations": []map[string]any{
		{"name": lbCluster, "primaryVMSet": "pool0"},
		{"name": rbacSelectedLB, "primaryVMSet": "pool-ns-none", "autoPlaceServices": false,
			"serviceNamespaceSelector": map[string]any{"matchLabels": map[string]string{"rbac": "ns"}}},
	},
	// Flushes of the Local pool every 2 s keep the subtest short.
	"loadBalancerBackendPoolUpdateIntervalInSeconds": 2,
}

// rbacLocalServiceOnSelectedLB creates a Local service in a labelled namespace that names lb-ns,
// with one pod: it must get an address on lb-ns (only possible when the CCM can read the
// namespace's labels) and its dedicated pool must hold exactly the pod's node (only possible
// when the local-pools controller can list and watch EndpointSlices: before its informers sync,
// the pool holds every node).
func rbacLocalServiceOnSelectedLB(t *testing.T, e *framework.Env) {
	ctx := lbCtx(t)
	f, err := lbARMClient(e.Azure)
	if err != nil {
		t.Fatal(err)
	}
	l := &lbEnv{Env: e, t: t, net: f, rg: e.Azure.ResourceGroup, ns: rbacLocalNS}
	if _, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: rbacLocalNS, Labels: map[string]string{"rbac": "ns"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": rbacLocalName}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: rbacLocalName, Namespace: rbacLocalNS}, Spec: appsv1.DeploymentSpec{
		Replicas: to.Ptr[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}}},
	}}
	if _, err := e.Kube.AppsV1().Deployments(rbacLocalNS).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := lbService(rbacLocalName, map[string]string{annotations.LoadBalancerConfigs: rbacSelectedLB})
	svc.Namespace = rbacLocalNS
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	svc = l.create(svc)

	nodeIP := map[string]string{}
	for _, m := range e.Machines {
		nodeIP[m.NodeName] = m.InternalIPs[0]
	}
	var podNode string
	l.waitFor("the pod ready on a node", func(ctx context.Context) (bool, error) {
		pods, err := e.Kube.CoreV1().Pods(rbacLocalNS).List(ctx, metav1.ListOptions{LabelSelector: "app=" + rbacLocalName})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && nodeIP[p.Spec.NodeName] != "" {
					podNode = p.Spec.NodeName
					return true, nil
				}
			}
		}
		return false, fmt.Errorf("%d pods, none ready", len(pods.Items))
	}, lbWait)
	l.waitIP(rbacLocalName)
	pool := azurenames.LocalServicePoolName(rbacLocalNS, rbacLocalName, azurenames.IPv4)
	want := []string{nodeIP[podNode]}
	l.waitFor("dedicated pool on "+rbacSelectedLB+" holds only the pod's node", func(ctx context.Context) (bool, error) {
		lb, err := rbacLB(ctx, l, rbacSelectedLB)
		if err != nil {
			return false, err
		}
		if len(lbObjectsOf(lb, azurenames.ServiceLBName(svc.UID))) == 0 {
			return false, fmt.Errorf("the service has nothing on %s (exists: %v)", rbacSelectedLB, lb != nil)
		}
		if got := poolIPs(lb, pool); !slices.Equal(got, want) {
			return false, fmt.Errorf("pool %s = %v, want %v (node %s)", pool, got, want, podNode)
		}
		return true, nil
	}, lbWait)

	// Deleted like the other service: the dedicated pool and lb-ns go with it.
	if err := e.Kube.CoreV1().Services(rbacLocalNS).Delete(ctx, rbacLocalName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	l.waitFor(rbacSelectedLB+" deleted with its only service", func(ctx context.Context) (bool, error) {
		lb, err := rbacLB(ctx, l, rbacSelectedLB)
		if err != nil {
			return false, err
		}
		return lb == nil, fmt.Errorf("%s still exists", rbacSelectedLB)
	}, lbWait)
}

// rbacLB reads one load balancer of the cluster's resource group (nil: it does not exist).
// Not lbEnv.state: the default topology has no resource group for public IPs elsewhere.
func rbacLB(ctx context.Context, l *lbEnv, name string) (*armnetwork.LoadBalancer, error) {
	r, err := l.net.NewLoadBalancersClient().Get(ctx, l.rg, name, nil)
	var re *azcore.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &r.LoadBalancer, nil
}
