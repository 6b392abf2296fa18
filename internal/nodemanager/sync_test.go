package nodemanager

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/server"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/nodes"
)

type fixedSource struct {
	md  nodes.NodeMetadata
	err error
}

func (s fixedSource) Metadata(context.Context, *v1.Node) (nodes.NodeMetadata, error) {
	return s.md, s.err
}
func (fixedSource) Name() string { return "test" }

func newNode(name string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: nodes.TaintUninitialized, Value: "true", Effect: v1.TaintEffectNoSchedule}}}}
}

func networkUnavailable(n *v1.Node) *v1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == v1.NodeNetworkUnavailable {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func TestSyncWithWaitRoutes(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset(newNode("n1"))
	rec := record.NewFakeRecorder(10)
	md := nodes.NodeMetadata{ProviderID: "azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/n1",
		InstanceType: "Standard_D2s_v3", Zone: "eastus-1", Region: "eastus",
		Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.240.0.4"}, {Type: v1.NodeHostName, Address: "n1"}}}
	s := &Syncer{Kube: kube, NodeName: "n1", Source: fixedSource{md: md}, WaitRoutes: true, Recorder: rec,
		Init: nodes.InitOptions{RemoveUninitializedTaint: true}}
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	n, _ := kube.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if c := networkUnavailable(n); c == nil || c.Status != v1.ConditionTrue || c.Reason != ReasonWaitingForRoutes {
		t.Fatalf("NetworkUnavailable %+v, want True/%s", c, ReasonWaitingForRoutes)
	}
	if len(n.Spec.Taints) != 0 || n.Spec.ProviderID != md.ProviderID || n.Labels[v1.LabelTopologyZone] != "eastus-1" {
		t.Fatalf("node not initialised: %+v", n)
	}
	if e := <-rec.Events; !strings.Contains(e, ReasonSynced) {
		t.Fatalf("event %q, want %s", e, ReasonSynced)
	}

	// Nothing to change: no write.
	kube.ClearActions()
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, a := range kube.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("idempotent sync wrote: %v", a)
		}
	}

	// The route controller reports the route: the node manager leaves it so.
	n, _ = kube.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	setCondition(n, v1.NodeCondition{Type: v1.NodeNetworkUnavailable, Status: v1.ConditionFalse, Reason: ReasonRouteCreated})
	if _, err := kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	n, _ = kube.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if c := networkUnavailable(n); c.Status != v1.ConditionFalse {
		t.Fatalf("NetworkUnavailable flipped back: %+v", c)
	}
}

func TestSyncWithoutWaitRoutesLeavesTheCondition(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset(newNode("n1"))
	s := &Syncer{Kube: kube, NodeName: "n1", Source: fixedSource{md: nodes.NodeMetadata{ProviderID: "azure://n1"}},
		Init: nodes.InitOptions{RemoveUninitializedTaint: true}}
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	n, _ := kube.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if c := networkUnavailable(n); c != nil {
		t.Fatalf("condition set without --wait-routes: %+v", c)
	}
}

func TestSyncFailureIsAnEventWhileInitialising(t *testing.T) {
	kube := fake.NewClientset(newNode("n1"))
	rec := record.NewFakeRecorder(10)
	s := &Syncer{Kube: kube, NodeName: "n1", Source: fixedSource{err: errors.New("boom")}, Recorder: rec}
	if err := s.Sync(context.Background()); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("err %v", err)
	}
	if e := <-rec.Events; !strings.Contains(e, ReasonInitFailed) {
		t.Fatalf("event %q", e)
	}
	if err := (&Syncer{Kube: kube, NodeName: "absent", Source: fixedSource{}}).Sync(context.Background()); err == nil {
		t.Fatal("missing node: no error")
	}
}

// ARM mode: the node's metadata comes from azsim through the CCM's resolver, by node name
// (no providerID yet) and then by providerID.
func TestARMSourceAgainstAzsim(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sim, err := server.Start(context.Background(), server.Options{IMDSAddr: "off"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sim.Close() }()
	res, err := sim.Seed(ctx, &topology.Topology{
		Location:       "eastus",
		ResourceGroups: []string{"rg"},
		VirtualNetworks: []topology.VirtualNetwork{{ResourceGroup: "rg", Name: "vnet", AddressPrefixes: []string{"10.0.0.0/8"},
			Subnets: []topology.Subnet{{Name: "nodes", AddressPrefix: "10.240.0.0/16"}}}},
		ScaleSets:        []topology.ScaleSet{{ResourceGroup: "rg", Name: "pool", Capacity: 2, Zones: []string{"1", "2"}, VMSize: "Standard_D4s_v3"}},
		AvailabilitySets: []topology.AvailabilitySet{{ResourceGroup: "rg", Name: "as", VMs: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf(`{"cloud":"AzureStackCloud","disableAzureStackCloud":true,"tenantId":%q,
		"subscriptionId":%q,"aadClientId":%q,"aadClientSecret":%q,"resourceGroup":"rg","location":"eastus","vmType":"vmss"}`,
		server.DefaultTenantID, res.SubscriptionID, server.DefaultClientID, server.DefaultClientSecret)), nil)
	if err != nil {
		t.Fatal(err)
	}
	env, err := config.ResolveEnvironment(ctx, cfg, sim.LookupEnvironmentFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	clients, err := arm.New(ctx, cfg, arm.Options{Transport: sim.HTTPClient(), Environment: &env, Metrics: arm.NewMetrics()})
	if err != nil {
		t.Fatal(err)
	}
	src := ARM{Resolver: nodes.NewResolver(cfg, clients.Caches, nil)}
	for _, m := range res.Machines {
		kube := fake.NewClientset(newNode(m.NodeName))
		s := &Syncer{Kube: kube, NodeName: m.NodeName, Source: src, WaitRoutes: true, Init: nodes.InitOptions{RemoveUninitializedTaint: true}}
		for pass := 0; pass < 2; pass++ { // by name, then by the providerID the first pass wrote
			if err := s.Sync(ctx); err != nil {
				t.Fatalf("%s: %v", m.NodeName, err)
			}
		}
		n, _ := kube.CoreV1().Nodes().Get(ctx, m.NodeName, metav1.GetOptions{})
		wantZone := fmt.Sprint(m.FaultDomain)
		if m.Zone != "" {
			wantZone = "eastus-" + m.Zone
		}
		switch {
		case !strings.EqualFold(n.Spec.ProviderID, m.ProviderID):
			t.Errorf("%s: providerID %s, want %s", m.NodeName, n.Spec.ProviderID, m.ProviderID)
		case n.Labels[v1.LabelTopologyZone] != wantZone || n.Labels[v1.LabelTopologyRegion] != "eastus":
			t.Errorf("%s: labels %v, want zone %s", m.NodeName, n.Labels, wantZone)
		case n.Labels[v1.LabelInstanceTypeStable] != m.VMSize:
			t.Errorf("%s: instance type %q, want %q", m.NodeName, n.Labels[v1.LabelInstanceTypeStable], m.VMSize)
		case len(n.Status.Addresses) == 0 || n.Status.Addresses[0].Address != m.InternalIPs[0]:
			t.Errorf("%s: addresses %v, want %v first", m.NodeName, n.Status.Addresses, m.InternalIPs)
		case len(n.Spec.Taints) != 0:
			t.Errorf("%s: taints %v", m.NodeName, n.Spec.Taints)
		case networkUnavailable(n) == nil || networkUnavailable(n).Status != v1.ConditionTrue:
			t.Errorf("%s: NetworkUnavailable %+v", m.NodeName, networkUnavailable(n))
		}
	}
	// A node without a VM is an error, not a half-initialised node.
	kube := fake.NewClientset(newNode("no-such-vm"))
	err = (&Syncer{Kube: kube, NodeName: "no-such-vm", Source: src}).Sync(ctx)
	if err == nil {
		t.Fatal("node without a VM synced")
	}
}

// The kubelet's --node-ip must be an address of the VM before the node is initialised, and
// comes first, as the cloud-node controller does it.
func TestSyncChecksProvidedNodeIP(t *testing.T) {
	ctx := context.Background()
	md := nodes.NodeMetadata{ProviderID: "azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/n1",
		Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.240.0.4"}, {Type: v1.NodeInternalIP, Address: "10.240.0.5"},
			{Type: v1.NodeHostName, Address: "n1"}}}
	annotated := func(ip string) *v1.Node {
		n := newNode("n1")
		n.Annotations = map[string]string{"alpha.kubernetes.io/provided-node-ip": ip}
		return n
	}

	kube := fake.NewClientset(annotated("10.240.0.9"))
	rec := record.NewFakeRecorder(10)
	s := &Syncer{Kube: kube, NodeName: "n1", Source: fixedSource{md: md}, Recorder: rec, Init: nodes.InitOptions{RemoveUninitializedTaint: true}}
	if err := s.Sync(ctx); err == nil || !strings.Contains(err.Error(), "10.240.0.9") {
		t.Fatalf("a node IP the VM does not have: err %v", err)
	}
	if e := <-rec.Events; !strings.Contains(e, ReasonInitFailed) {
		t.Fatalf("event %q, want %s", e, ReasonInitFailed)
	}
	n, _ := kube.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if len(n.Spec.Taints) != 1 || n.Spec.ProviderID != "" {
		t.Fatalf("node initialised with a foreign node IP: %+v", n)
	}

	kube = fake.NewClientset(annotated("10.240.0.5"))
	s = &Syncer{Kube: kube, NodeName: "n1", Source: fixedSource{md: md}, Init: nodes.InitOptions{RemoveUninitializedTaint: true}}
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	n, _ = kube.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	want := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.240.0.5"}, {Type: v1.NodeHostName, Address: "n1"}}
	if len(n.Spec.Taints) != 0 || fmt.Sprint(n.Status.Addresses) != fmt.Sprint(want) {
		t.Fatalf("taints %v, addresses %v; want none and %v", n.Spec.Taints, n.Status.Addresses, want)
	}
}
