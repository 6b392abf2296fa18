//go:build bench

package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	sdkto "github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/azure-ccm/azure-ccm/test/framework"
	"github.com/azure-ccm/azure-ccm/test/framework/azurenames"
)

// TestServiceGatewayBench: SG_BENCH_SERVICES LoadBalancer Services (default 100) with
// SG_BENCH_PODS pods each (default 20) on SG_BENCH_NODES kwok nodes (default 20) in
// container-based mode, then a rolling restart of every Deployment. For each phase it reports
// the ARM calls (gateway actions, resource writes) and the time until azsim's service gateway
// matches the cluster. The goal: gateway calls grow with the number of batches, not pods.
func TestServiceGatewayBench(t *testing.T) {
	services, pods, nodes := envInt("SG_BENCH_SERVICES", 100), envInt("SG_BENCH_PODS", 20), envInt("SG_BENCH_NODES", 20)
	topo := framework.DefaultTopology()
	topo.ScaleSets[0].Capacity = nodes
	e := framework.Start(t, framework.Options{CCMBinary: ccmBinary(), Topology: topo, CloudConfig: map[string]any{
		"serviceGatewayEnabled": true, "loadBalancerBackendPoolConfigurationType": "podIP", "loadBalancerSku": "service",
		"enableLoadBalancerAdminState": false}})
	net := sgBenchClient(t, e.Azure)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	vnetID := fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/virtualNetworks/%s", e.Azure.SubscriptionID, e.Azure.VnetResourceGroup, e.Azure.VnetName)
	p, err := net.NewServiceGatewaysClient().BeginCreateOrUpdate(ctx, e.Azure.ResourceGroup, azurenames.ServiceGatewayName, armnetwork.ServiceGateway{
		Location: sdkto.Ptr(e.Azure.Location), Properties: &armnetwork.ServiceGatewayPropertiesFormat{VirtualNetwork: &armnetwork.VirtualNetwork{ID: sdkto.Ptr(vnetID)}}}, nil)
	if err == nil {
		_, err = p.PollUntilDone(ctx, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range e.Machines {
		n := framework.NewNode(m, framework.NodeOptions{ProviderID: true})
		n.Spec.PodCIDR = fmt.Sprintf("10.%d.%d.0/24", 100+i/256, i%256)
		n.Spec.PodCIDRs = []string{n.Spec.PodCIDR}
		if _, err := e.Kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.StartCCM("--controllers=*,-admin-state" + sgLocalPoolsOff(e))
	for _, m := range e.Machines {
		e.WaitFor("node "+m.NodeName+" initialized", e.NodeInitialized(m.NodeName), 5*time.Minute)
	}
	b := &sgBench{t: t, e: e, net: net, rg: e.Azure.ResourceGroup}

	// Phase 1: services and pods created at once.
	b.reset(ctx)
	start := time.Now()
	sgParallel(t, services, func(i int) error {
		name := fmt.Sprintf("svc%03d", i)
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: appsv1.DeploymentSpec{
			Replicas: sdkto.Ptr(int32(pods)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}}}
		if _, err := e.Kube.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
			return err
		}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}}}
		_, err := e.Kube.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
		return err
	})
	b.waitInStep(ctx, services*pods, 30*time.Minute)
	b.record("create", services*pods, time.Since(start))

	// Phase 2: rolling restart of every Deployment (new pods, new IPs, old ones go).
	b.reset(ctx)
	start = time.Now()
	patch := []byte(fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"bench/restartedAt":%q}}}}}`, start.Format(time.RFC3339)))
	sgParallel(t, services, func(i int) error {
		_, err := e.Kube.AppsV1().Deployments("default").Patch(ctx, fmt.Sprintf("svc%03d", i), types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	b.waitRolled(ctx, services, pods, 30*time.Minute)
	b.record("rolling restart", 2*services*pods, time.Since(start))

	t.Logf("container-based pools: %d services × %d pods on %d nodes", services, pods, nodes)
	t.Logf("%-16s %11s %10s %11s %10s %10s %6s %6s %8s", "phase", "pod_changes", "converge", "addr_calls", "addr_sent", "svc_calls", "posts", "puts", "deletes")
	for _, r := range b.results {
		t.Logf("%-16s %11d %10s %11d %10d %10d %6d %6d %8d", r.phase, r.podChanges, r.took.Round(100*time.Millisecond), r.locationCalls, r.addresses, r.serviceCalls, r.posts, r.puts, r.deletes)
	}
}

type sgBench struct {
	t       *testing.T
	e       *framework.Env
	net     *armnetwork.ClientFactory
	rg      string
	results []sgResult
	before  map[string]float64
}

type sgResult struct {
	phase                                      string
	podChanges                                 int
	took                                       time.Duration
	locationCalls, serviceCalls, puts, deletes int64
	posts, addresses                           int64
}

func (b *sgBench) reset(ctx context.Context) {
	if err := b.e.Azsim.ResetStats(ctx); err != nil {
		b.t.Fatal(err)
	}
	b.before = b.ccmMetrics()
}

// ccmMetrics scrapes the CCM's servicegateway_* samples (name{labels} → value).
func (b *sgBench) ccmMetrics() map[string]float64 {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Get(fmt.Sprintf("https://127.0.0.1:%d/metrics", b.e.CCMPort()))
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "servicegateway_") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

func (b *sgBench) delta(key string) int64 {
	return int64(b.ccmMetrics()[key] - b.before[key])
}

func (b *sgBench) record(phase string, podChanges int, took time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := b.e.Azsim.Stats(ctx)
	if err != nil {
		b.t.Fatal(err)
	}
	r := sgResult{phase: phase, podChanges: podChanges, took: took,
		locationCalls: b.delta(`servicegateway_calls_total{call="update_address_locations",result="success"}`),
		serviceCalls:  b.delta(`servicegateway_calls_total{call="update_services",result="success"}`),
		addresses:     b.delta(`servicegateway_batch_size_sum{call="update_address_locations"}`),
	}
	for _, c := range st.Requests {
		switch {
		case c.Method == http.MethodPost:
			r.posts += c.Count
		case c.Method == http.MethodPut:
			r.puts += c.Count
		case c.Method == http.MethodDelete:
			r.deletes += c.Count
		}
	}
	b.results = append(b.results, r)
	b.t.Logf("%s: %d pod changes converged in %s: %d updateAddressLocations (%d addresses sent), %d updateServices, ARM POSTs %d, PUTs %d, DELETEs %d",
		phase, podChanges, took.Round(100*time.Millisecond), r.locationCalls, r.addresses, r.serviceCalls, r.posts, r.puts, r.deletes)
}

// state compares the gateway with the cluster: ready pods of each service under their node.
func (b *sgBench) state(ctx context.Context) (want, got map[string]string, err error) {
	nodes, err := b.e.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	nodeIP := map[string]string{}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				nodeIP[n.Name] = a.Address
			}
		}
	}
	svcs, err := b.e.Kube.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	uidOf := map[string]string{}
	for _, s := range svcs.Items {
		if s.Spec.Type == corev1.ServiceTypeLoadBalancer {
			uidOf[s.Name] = strings.ToLower(string(s.UID))
		}
	}
	pods, err := b.e.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	want = map[string]string{}
	for _, p := range pods.Items {
		uid := uidOf[p.Labels["app"]]
		if uid == "" || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				want[nodeIP[p.Spec.NodeName]+"/"+p.Status.PodIP] = uid
			}
		}
	}
	got = map[string]string{}
	pager := b.net.NewServiceGatewaysClient().NewGetAddressLocationsPager(b.rg, azurenames.ServiceGatewayName, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, nil, err
		}
		for _, l := range page.Value {
			for _, a := range l.Addresses {
				var s []string
				for _, v := range a.Services {
					s = append(s, *v)
				}
				sort.Strings(s)
				got[*l.AddressLocation+"/"+*a.Address] = strings.Join(s, ",")
			}
		}
	}
	return want, got, nil
}

func (b *sgBench) waitInStep(ctx context.Context, addresses int, timeout time.Duration) {
	b.e.WaitFor(fmt.Sprintf("%d addresses in the gateway", addresses), func(ctx context.Context) (bool, error) {
		want, got, err := b.state(ctx)
		if err != nil {
			return false, err
		}
		if len(want) != addresses || !maps.Equal(want, got) {
			return false, fmt.Errorf("cluster %d ready addresses (want %d), gateway %d", len(want), addresses, len(got))
		}
		return true, nil
	}, timeout)
}

// waitRolled waits for every Deployment to finish its rollout and the gateway to match.
func (b *sgBench) waitRolled(ctx context.Context, services, pods int, timeout time.Duration) {
	b.e.WaitFor("rolling restart done and in step", func(ctx context.Context) (bool, error) {
		ds, err := b.e.Kube.AppsV1().Deployments("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, d := range ds.Items {
			s := d.Status
			if s.ObservedGeneration < d.Generation || s.UpdatedReplicas != int32(pods) || s.Replicas != int32(pods) || s.AvailableReplicas != int32(pods) {
				return false, fmt.Errorf("deployment %s: updated %d, replicas %d, available %d", d.Name, s.UpdatedReplicas, s.Replicas, s.AvailableReplicas)
			}
		}
		want, got, err := b.state(ctx)
		if err != nil {
			return false, err
		}
		if len(want) != services*pods || !maps.Equal(want, got) {
			return false, fmt.Errorf("cluster %d ready addresses, gateway %d", len(want), len(got))
		}
		return true, nil
	}, timeout)
}

func sgParallel(t *testing.T, n int, f func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := f(i); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// sgLocalPoolsOff also switches off local-pools (node-based pools only) when the binary has it.
func sgLocalPoolsOff(e *framework.Env) string {
	out, _ := exec.Command(e.CCMBinary(), "--help").CombinedOutput()
	if strings.Contains(string(out), " local-pools,") {
		return ",-local-pools"
	}
	return ""
}

func sgBenchClient(t *testing.T, a *framework.Azure) *armnetwork.ClientFactory {
	t.Helper()
	opts := azcore.ClientOptions{Cloud: cloud.Configuration{ActiveDirectoryAuthorityHost: a.URL + "/",
		Services: map[cloud.ServiceName]cloud.ServiceConfiguration{cloud.ResourceManager: {Endpoint: a.URL, Audience: "https://management.azure.com/"}}},
		Transport: a.Server.HTTPClient()}
	cred, err := azidentity.NewClientSecretCredential(a.TenantID, a.ClientID, a.ClientSecret,
		&azidentity.ClientSecretCredentialOptions{ClientOptions: opts, DisableInstanceDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	f, err := armnetwork.NewClientFactory(a.SubscriptionID, cred, &arm.ClientOptions{ClientOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	return f
}
