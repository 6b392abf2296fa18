package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/azure-ccm/azure-ccm/internal/azsim/server"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	"github.com/azure-ccm/azure-ccm/internal/nodes"
)

// The node manager initialises its Node from azsim's IMDS.
func TestSyncNodeFromAzsimIMDS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sim, err := server.Start(context.Background(), server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	res, err := sim.Seed(ctx, &topology.Topology{
		VirtualNetworks: []topology.VirtualNetwork{{ResourceGroup: "RG", Name: "vnet", AddressPrefixes: []string{"10.0.0.0/8"},
			Subnets: []topology.Subnet{{Name: "nodes", AddressPrefix: "10.240.0.0/16"}}}},
		ScaleSets: []topology.ScaleSet{{ResourceGroup: "RG", Name: "pool", Capacity: 2, Zones: []string{"1", "2"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	m := res.Machines[1]
	sim.IMDS().SetDefaultVM(m.NodeName)

	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: m.NodeName},
		Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: nodes.TaintUninitialized, Value: "true", Effect: v1.TaintEffectNoSchedule}}}}
	kube := fake.NewSimpleClientset(node)
	o := options{nodeName: m.NodeName, imdsEndpoint: sim.IMDSURL(), removeTaint: true}
	if err := syncNode(ctx, kube, http.DefaultClient, o); err != nil {
		t.Fatal(err)
	}
	got, err := kube.CoreV1().Nodes().Get(ctx, m.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.ProviderID != m.ProviderID {
		t.Errorf("providerID %s want %s", got.Spec.ProviderID, m.ProviderID)
	}
	if got.Labels[v1.LabelTopologyZone] != "eastus-"+m.Zone || got.Labels[v1.LabelTopologyRegion] != "eastus" ||
		got.Labels[v1.LabelInstanceTypeStable] != m.VMSize {
		t.Errorf("labels %v (machine %+v)", got.Labels, m)
	}
	if len(got.Spec.Taints) != 0 {
		t.Errorf("taints %v", got.Spec.Taints)
	}
	if len(got.Status.Addresses) == 0 || got.Status.Addresses[0].Address != m.InternalIPs[0] {
		t.Errorf("addresses %v want %v", got.Status.Addresses, m.InternalIPs)
	}
	// A second pass changes nothing.
	kube.ClearActions()
	if err := syncNode(ctx, kube, http.DefaultClient, o); err != nil {
		t.Fatal(err)
	}
	for _, a := range kube.Actions() {
		if a.GetVerb() == "update" {
			t.Errorf("idempotent sync wrote: %v", a)
		}
	}
}
