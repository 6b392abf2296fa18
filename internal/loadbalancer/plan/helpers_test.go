package plan

import (
	"encoding/json"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
)

const (
	sub     = "00000000-0000-0000-0000-000000000001"
	uidA    = "aaaaaaaa-1111-2222-3333-444444444444"
	uidB    = "bbbbbbbb-1111-2222-3333-444444444444"
	svcA    = "aaaaaaaaa11112222333344444444444" // "a" + uidA without dashes, cut to 32
	svcB    = "abbbbbbbb11112222333344444444444"
	lbID    = "/subscriptions/" + sub + "/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/kubernetes"
	ilbID   = lbID + "-internal"
	pipRG   = "/subscriptions/" + sub + "/resourceGroups/rg/providers/Microsoft.Network/publicIPAddresses/"
	subnet1 = "/subscriptions/" + sub + "/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/vnet/subnets/subnet1"
)

func cluster() *Cluster {
	return &Cluster{SubscriptionID: sub, ResourceGroup: "rg", Location: "eastus", ClusterName: "kubernetes",
		Zones: []string{"1", "2", "3"}}
}

type svcT = v1.Service

type svcOpt func(*v1.Service)

func withAnn(k, v string) svcOpt {
	return func(s *v1.Service) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[k] = v
	}
}

func withPorts(ps ...v1.ServicePort) svcOpt { return func(s *v1.Service) { s.Spec.Ports = ps } }

func tcp(port, nodePort int32) v1.ServicePort {
	return v1.ServicePort{Name: "p" + itoa(port), Port: port, NodePort: nodePort, Protocol: v1.ProtocolTCP}
}

func udp(port, nodePort int32) v1.ServicePort {
	return v1.ServicePort{Name: "u" + itoa(port), Port: port, NodePort: nodePort, Protocol: v1.ProtocolUDP}
}

func itoa(i int32) string { b, _ := json.Marshal(i); return string(b) }

func dualStack(s *v1.Service) { s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} }

func ipv6Only(s *v1.Service) { s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol} }

func local(hc int32) svcOpt {
	return func(s *v1.Service) {
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = hc
	}
}

func mkService(t *testing.T, uid, name string, opts ...svcOpt) *Service {
	t.Helper()
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)},
		Spec: v1.ServiceSpec{
			Type:  v1.ServiceTypeLoadBalancer,
			Ports: []v1.ServicePort{tcp(80, 30080)},
		},
	}
	for _, o := range opts {
		o(s)
	}
	o, err := annotations.Parse(s)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return &Service{Svc: s, Opts: o}
}

func publicFronts(s *Service, pipNames ...string) []Frontend {
	var out []Frontend
	for i, f := range s.Families() {
		out = append(out, Frontend{Family: f, PublicIPID: pipRG + pipNames[i]})
	}
	return out
}

func internalFront(f naming.Family) Frontend { return Frontend{Family: f, SubnetID: subnet1} }

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func clone[T any](t *testing.T, v *T) *T {
	t.Helper()
	out := new(T)
	if err := json.Unmarshal([]byte(mustJSON(t, v)), out); err != nil {
		t.Fatal(err)
	}
	return out
}

func findRule(lb *armnetwork.LoadBalancer, name string) *armnetwork.LoadBalancingRule {
	for _, r := range lb.Properties.LoadBalancingRules {
		if *r.Name == name {
			return r
		}
	}
	return nil
}

func findProbe(lb *armnetwork.LoadBalancer, name string) *armnetwork.Probe {
	for _, p := range lb.Properties.Probes {
		if *p.Name == name {
			return p
		}
	}
	return nil
}

func names[T any](items []*T, name func(*T) *string) []string {
	var out []string
	for _, it := range items {
		out = append(out, *name(it))
	}
	return out
}

func ruleNames(lb *armnetwork.LoadBalancer) []string {
	return names(lb.Properties.LoadBalancingRules, func(r *armnetwork.LoadBalancingRule) *string { return r.Name })
}

func probeNames(lb *armnetwork.LoadBalancer) []string {
	return names(lb.Properties.Probes, func(r *armnetwork.Probe) *string { return r.Name })
}

func frontendNames(lb *armnetwork.LoadBalancer) []string {
	return names(lb.Properties.FrontendIPConfigurations, func(r *armnetwork.FrontendIPConfiguration) *string { return r.Name })
}

func poolNames(lb *armnetwork.LoadBalancer) []string {
	return names(lb.Properties.BackendAddressPools, func(r *armnetwork.BackendAddressPool) *string { return r.Name })
}

func eqStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
