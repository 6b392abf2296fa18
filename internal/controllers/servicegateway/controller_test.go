package servicegateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azarm "github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/server"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	"github.com/azure-ccm/azure-ccm/internal/servicegateway/admission"
	"github.com/azure-ccm/azure-ccm/internal/servicegateway/updater"
	"github.com/azure-ccm/azure-ccm/internal/testutil"
)

const testRG = "rg-cluster"

func azsim(t *testing.T, ctx context.Context) *updater.Azure {
	t.Helper()
	srv, err := server.Start(ctx, server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	if _, err := srv.Seed(ctx, &topology.Topology{ResourceGroups: []string{testRG},
		VirtualNetworks: []topology.VirtualNetwork{{ResourceGroup: testRG, Name: "vnet", AddressPrefixes: []string{"10.0.0.0/8"},
			Subnets: []topology.Subnet{{Name: "subnet", AddressPrefix: "10.240.0.0/16"}}}}}); err != nil {
		t.Fatal(err)
	}
	opts := azcore.ClientOptions{Cloud: cloud.Configuration{ActiveDirectoryAuthorityHost: srv.URL() + "/",
		Services: map[cloud.ServiceName]cloud.ServiceConfiguration{cloud.ResourceManager: {Endpoint: srv.URL(), Audience: "https://management.azure.com/"}}},
		Transport: srv.HTTPClient()}
	cred, err := azidentity.NewClientSecretCredential(server.DefaultTenantID, server.DefaultClientID, server.DefaultClientSecret,
		&azidentity.ClientSecretCredentialOptions{ClientOptions: opts, DisableInstanceDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	f, err := armnetwork.NewClientFactory(topology.DefaultSubscriptionID, cred, &azarm.ClientOptions{ClientOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	scope := updater.Scope{SubscriptionID: topology.DefaultSubscriptionID, ResourceGroup: testRG, Location: topology.DefaultLocation, ClusterName: "kubernetes",
		VNetID: "/subscriptions/" + topology.DefaultSubscriptionID + "/resourceGroups/" + testRG + "/providers/Microsoft.Network/virtualNetworks/vnet"}
	p, err := f.NewServiceGatewaysClient().BeginCreateOrUpdate(ctx, testRG, updater.GatewayName, armnetwork.ServiceGateway{Location: to.Ptr(scope.Location),
		Properties: &armnetwork.ServiceGatewayPropertiesFormat{VirtualNetwork: &armnetwork.VirtualNetwork{ID: to.Ptr(scope.VNetID)}}}, nil)
	if err == nil {
		_, err = p.PollUntilDone(ctx, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	return &updater.Azure{Scope: scope, Network: f, PollFrequency: 20 * time.Millisecond}
}

// TestController drives the controller with a fake API server against azsim: a Service and
// its EndpointSlice become a registration, addresses under the node IP, an ingress IP and a
// finalizer; a rejected option is an event naming it; deletion releases the finalizer after
// the resources are gone.
func TestController(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	az := azsim(t, ctx)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.240.0.4"}}}}
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "ABC-1"}, Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer,
		Ports: []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolTCP}}}}
	bad := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "internal", Namespace: "default", UID: "DEF-2",
		Annotations: map[string]string{admission.AnnotationInternal: "true"}}, Spec: svc.Spec}
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.5"}, NodeName: to.Ptr("n1")}, {Addresses: []string{"10.244.0.6"}, NodeName: to.Ptr("n1")}}}
	kube := fake.NewClientset(node, svc, bad, slice)
	rec := record.NewFakeRecorder(100)
	runController(t, ctx, az, kube, rec)

	testutil.Eventually(t, "ingress IP and finalizer", func() error {
		s, err := kube.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(s.Status.LoadBalancer.Ingress) != 1 || !slices.Contains(s.Finalizers, Finalizer) {
			return fmt.Errorf("status %+v finalizers %v", s.Status.LoadBalancer, s.Finalizers)
		}
		return nil
	})
	testutil.Eventually(t, "addresses in the gateway", func() error {
		st, err := az.ReadGateway(ctx)
		if err != nil {
			return err
		}
		got := st.Locations["10.240.0.4"]
		if len(got) != 2 || !slices.Equal(got["10.244.0.5"], []string{"abc-1"}) || len(st.Services) != 1 {
			return fmt.Errorf("locations %v services %d", st.Locations, len(st.Services))
		}
		return nil
	})
	var events []string
	testutil.Eventually(t, "events", func() error {
		events = append(events, drain(rec)...)
		if !containsAll(events, "Warning UnsupportedLoadBalancerOption", admission.AnnotationInternal) || !containsAll(events, "Normal ServiceGatewayReady") {
			return fmt.Errorf("events: %q", events)
		}
		return nil
	})
	if s, _ := kube.CoreV1().Services("default").Get(ctx, "internal", metav1.GetOptions{}); len(s.Finalizers) != 0 {
		t.Fatalf("rejected service got finalizers %v", s.Finalizers)
	}

	// Deletion: the API server sets the deletion timestamp and keeps the object for the finalizer.
	s, _ := kube.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
	s.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	if _, err := kube.CoreV1().Services("default").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "finalizer released after the resources are gone", func() error {
		s, err := kube.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if slices.Contains(s.Finalizers, Finalizer) {
			return fmt.Errorf("finalizer still there")
		}
		st, err := az.ReadGateway(ctx)
		if err != nil {
			return err
		}
		if len(st.Services) != 0 || len(st.Locations) != 0 {
			return fmt.Errorf("gateway still has %d services, locations %v", len(st.Services), st.Locations)
		}
		if _, err := az.Network.NewLoadBalancersClient().Get(ctx, testRG, "abc-1", nil); !arm.IsNotFound(err) {
			return fmt.Errorf("load balancer still there: %v", err)
		}
		return nil
	})
}

// runController starts the controller on kube's objects against az, with a short gather
// window, until ctx ends.
func runController(t *testing.T, ctx context.Context, az *updater.Azure, kube *fake.Clientset, rec record.EventRecorder) {
	t.Helper()
	f := informers.NewSharedInformerFactory(kube, 0)
	pf, pods := EgressPodsInformer(kube, 0)
	c, err := New(Options{Kube: kube, Services: f.Core().V1().Services(), Nodes: f.Core().V1().Nodes(), EndpointSlices: f.Discovery().V1().EndpointSlices(),
		EgressPods: pods, Recorder: rec, Azure: az, Updater: updater.Options{Gather: time.Millisecond, MinBackoff: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	pf.Start(ctx.Done())
	go c.Run(ctx, 2)
}

func drain(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func containsAll(events []string, parts ...string) bool {
	for _, e := range events {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(e, p)
		}
		if ok {
			return true
		}
	}
	return false
}

// TestNewFailsOnAStoppedInformer: an informer that no longer takes handlers fails New, naming
// what the controller could not watch, rather than leaving it deaf to those objects.
func TestNewFailsOnAStoppedInformer(t *testing.T) {
	kube := fake.NewClientset()
	f := informers.NewSharedInformerFactory(kube, 0)
	_, pods := EgressPodsInformer(kube, 0)
	nodes := f.Core().V1().Nodes()
	stop := make(chan struct{})
	go nodes.Informer().Run(stop)
	close(stop)
	testutil.Eventually(t, "the node informer stopped", func() error {
		if !nodes.Informer().IsStopped() {
			return errors.New("still running")
		}
		return nil
	})
	_, err := New(Options{Kube: kube, Services: f.Core().V1().Services(), Nodes: nodes, EndpointSlices: f.Discovery().V1().EndpointSlices(),
		EgressPods: pods, Recorder: record.NewFakeRecorder(1)})
	if err == nil || !strings.Contains(err.Error(), "watching nodes") {
		t.Fatalf("New with a stopped node informer: %v, want an error naming the nodes", err)
	}
}

// TestNamedPortServiceLosesItsLastPods: a service whose target port is named resolves it from
// its ready endpoints. When its EndpointSlice goes from a ready pod straight to none (the
// controller saw no update in between, as when a deployment is scaled to zero under load), the
// port cannot be resolved any more, but the pod's address must still leave the gateway.
func TestNamedPortServiceLosesItsLastPods(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	az := azsim(t, ctx)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.240.0.4"}}}}
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "ABC-1"}, Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer,
		Ports: []v1.ServicePort{{Name: "web", Port: 80, TargetPort: intstr.FromString("http"), Protocol: v1.ProtocolTCP}}}}
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		Ports:     []discoveryv1.EndpointPort{{Name: to.Ptr("web"), Port: to.Ptr[int32](8080), Protocol: to.Ptr(v1.ProtocolTCP)}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.5"}, NodeName: to.Ptr("n1"), Conditions: discoveryv1.EndpointConditions{Ready: to.Ptr(true)}}}}
	kube := fake.NewClientset(node, svc, slice)
	runController(t, ctx, az, kube, record.NewFakeRecorder(100))
	locations := func(want int) func() error {
		return func() error {
			st, err := az.ReadGateway(ctx)
			if err != nil {
				return err
			}
			n := 0
			for _, addrs := range st.Locations {
				n += len(addrs)
			}
			if n != want || len(st.Services) != 1 {
				return fmt.Errorf("%d addresses in %v, %d services; want %d addresses of one service", n, st.Locations, len(st.Services), want)
			}
			return nil
		}
	}
	testutil.Eventually(t, "the ready pod in the gateway", locations(1))

	// What the EndpointSlice controller leaves once no pod is left: a slice without endpoints
	// or ports.
	slice.Endpoints, slice.Ports = nil, nil
	if _, err := kube.DiscoveryV1().EndpointSlices("default").Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the gone pod's address out of the gateway, the service still registered", locations(0))
}
