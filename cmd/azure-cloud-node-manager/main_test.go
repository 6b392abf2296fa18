package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/azure-ccm/azure-ccm/internal/azsim/server"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	"github.com/azure-ccm/azure-ccm/internal/nodemanager"
	"github.com/azure-ccm/azure-ccm/internal/nodes"
)

// existingFlags is the command line of the existing provider's cloud-node-manager: each of its
// flags (misc, secure serving, authentication, authorization, global, as registered by its
// k8s.io/apiserver and component-base v0.36) with a valid value. The node manager must accept
// all of them.
var existingFlags = []string{
	"--master=https://127.0.0.1:6443",
	"--kubeconfig=/etc/kubernetes/kubelet.conf",
	"--node-name=Node-1",
	"--node-status-update-frequency=10m",
	"--min-resync-period=100m",
	"--kube-api-content-type=application/vnd.kubernetes.protobuf",
	"--kube-api-qps=50",
	"--kube-api-burst=100",
	"--wait-routes=true",
	"--use-instance-metadata=false",
	"--cloud-config=/etc/kubernetes/azure.json",
	"--enable-deprecated-beta-topology-labels=true",
	// secure serving
	"--bind-address=0.0.0.0",
	"--secure-port=10263",
	"--cert-dir=/var/run/cnm",
	"--tls-cert-file=",
	"--tls-private-key-file=",
	"--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
	"--tls-min-version=VersionTLS12",
	"--tls-sni-cert-key=/etc/cnm/sni.crt,/etc/cnm/sni.key",
	"--http2-max-streams-per-connection=100",
	"--permit-port-sharing=false",
	"--permit-address-sharing=false",
	"--disable-http2-serving=false",
	"--tls-curve-preferences=23,29",
	// authentication
	"--authentication-kubeconfig=",
	"--authentication-skip-lookup=false",
	"--authentication-token-webhook-cache-ttl=10s",
	"--authentication-tolerate-lookup-failure=false",
	"--client-ca-file=",
	"--requestheader-allowed-names=front-proxy-client",
	"--requestheader-client-ca-file=",
	"--requestheader-extra-headers-prefix=X-Remote-Extra-",
	"--requestheader-group-headers=X-Remote-Group",
	"--requestheader-username-headers=X-Remote-User",
	"--requestheader-uid-headers=X-Remote-Uid",
	// authorization
	"--authorization-kubeconfig=",
	"--authorization-always-allow-paths=/healthz",
	"--authorization-webhook-cache-authorized-ttl=10s",
	"--authorization-webhook-cache-unauthorized-ttl=10s",
	// global
	"--v=2",
	"--vmodule=",
	"--log-flush-frequency=5s",
	"--version=false",
}

func TestEveryExistingFlagIsAccepted(t *testing.T) {
	o := newOptions()
	fs, _ := newFlagSet(o, "azure-cloud-node-manager")
	if err := fs.Parse(existingFlags); err != nil {
		t.Fatalf("the existing node manager's command line is refused: %v", err)
	}
	if err := o.complete(); err != nil {
		t.Fatal(err)
	}
	switch {
	case o.nodeName != "node-1":
		t.Errorf("node name %q, want it lower-cased", o.nodeName)
	case o.useInstanceMetadata || o.cloudConfig != "/etc/kubernetes/azure.json" || !o.waitRoutes || !o.betaLabels:
		t.Errorf("ARM mode flags not applied: %+v", o)
	case o.qps != 50 || o.burst != 100 || o.contentType != "application/vnd.kubernetes.protobuf":
		t.Errorf("client flags not applied: %+v", o)
	case o.nodeStatusUpdateFrequency != 10*time.Minute || o.minResyncPeriod != 100*time.Minute:
		t.Errorf("periods not applied: %+v", o)
	case o.secureServing.BindPort != 10263:
		t.Errorf("--secure-port not applied: %d", o.secureServing.BindPort)
	}
	if fs.Lookup("help") == nil {
		t.Error("no --help")
	}
}

func TestDefaultsMatchTheExistingNodeManager(t *testing.T) {
	o := newOptions()
	fs, _ := newFlagSet(o, "azure-cloud-node-manager")
	if err := fs.Parse([]string{"--node-name=n"}); err != nil {
		t.Fatal(err)
	}
	if !o.useInstanceMetadata || o.waitRoutes || o.nodeStatusUpdateFrequency != 5*time.Minute || o.qps != 20 || o.burst != 30 ||
		o.secureServing.BindPort != 0 {
		t.Errorf("defaults differ from the existing node manager's: %+v (secure port %d)", o, o.secureServing.BindPort)
	}
}

func TestARMModeNeedsACloudConfig(t *testing.T) {
	o := newOptions()
	fs, _ := newFlagSet(o, "azure-cloud-node-manager")
	if err := fs.Parse([]string{"--node-name=n", "--use-instance-metadata=false"}); err != nil {
		t.Fatal(err)
	}
	if err := o.complete(); err == nil || !strings.Contains(err.Error(), "--cloud-config") {
		t.Fatalf("err %v, want one naming --cloud-config", err)
	}
}

func TestUnknownFlagIsRefused(t *testing.T) {
	fs, _ := newFlagSet(newOptions(), "azure-cloud-node-manager")
	if err := fs.Parse([]string{"--no-such-flag=1"}); err == nil {
		t.Fatal("unknown flag accepted")
	}
}

// The node manager initialises its Node from azsim's IMDS.
func TestSyncNodeFromAzsimIMDS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sim, err := server.Start(context.Background(), server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sim.Close() }()
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
	kube := fake.NewClientset(node)
	s := &nodemanager.Syncer{Kube: kube, NodeName: m.NodeName, Source: nodemanager.IMDS{Client: http.DefaultClient, Endpoint: sim.IMDSURL()},
		Init: nodes.InitOptions{RemoveUninitializedTaint: true}}
	if err := s.Sync(ctx); err != nil {
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
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, a := range kube.Actions() {
		if a.GetVerb() == "update" {
			t.Errorf("idempotent sync wrote: %v", a)
		}
	}
}
