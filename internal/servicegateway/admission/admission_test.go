package admission

import (
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/azure-ccm/azure-ccm/internal/servicegateway/updater"
)

func ptr[T any](v T) *T { return &v }

func svc(mut func(*v1.Service)) *v1.Service {
	s := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolTCP}}}}
	if mut != nil {
		mut(s)
	}
	return s
}

func TestAdmit(t *testing.T) {
	named := []*discoveryv1.EndpointSlice{{Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(9000))}}}}
	tests := []struct {
		name     string
		svc      *v1.Service
		eps      []*discoveryv1.EndpointSlice
		wanted   bool
		rejected []string // substrings, in order
		ignored  []string
		pending  bool
		spec     updater.InboundSpec
	}{
		{name: "plain", svc: svc(nil), wanted: true,
			spec: updater.InboundSpec{Ports: []updater.Port{{Protocol: "Tcp", FrontendPort: 80, BackendPort: 8080}}, IdleTimeoutMinutes: 4}},
		{name: "ClusterIP", svc: svc(func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeClusterIP })},
		{name: "other class", svc: svc(func(s *v1.Service) { s.Spec.LoadBalancerClass = ptr("metallb") })},
		{name: "deleting", svc: svc(func(s *v1.Service) { s.DeletionTimestamp = &metav1.Time{} })},
		{name: "no target port means the port", svc: svc(func(s *v1.Service) { s.Spec.Ports[0].TargetPort = intstr.IntOrString{} }), wanted: true,
			spec: updater.InboundSpec{Ports: []updater.Port{{Protocol: "Tcp", FrontendPort: 80, BackendPort: 80}}, IdleTimeoutMinutes: 4}},
		{name: "udp, ClientIP affinity, idle timeout, IPv6", wanted: true, svc: svc(func(s *v1.Service) {
			s.Spec.Ports[0].Protocol = v1.ProtocolUDP
			s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol}
			s.Annotations = map[string]string{AnnotationIdleTimeout: "15"}
		}), spec: updater.InboundSpec{Ports: []updater.Port{{Protocol: "Udp", FrontendPort: 80, BackendPort: 8080}}, IdleTimeoutMinutes: 15, SourceIPAffinity: true, IPv6: true}},
		{name: "internal, loadBalancerIP, dual-stack rejected", wanted: true, svc: svc(func(s *v1.Service) {
			s.Annotations = map[string]string{AnnotationInternal: "true"}
			s.Spec.LoadBalancerIP = "1.2.3.4"
			s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
		}), rejected: []string{AnnotationInternal, "spec.loadBalancerIP", "dual-stack"},
			spec: updater.InboundSpec{Ports: []updater.Port{{Protocol: "Tcp", FrontendPort: 80, BackendPort: 8080}}, IdleTimeoutMinutes: 4}},
		{name: "bad idle timeout, SCTP, port collision", wanted: true, svc: svc(func(s *v1.Service) {
			s.Annotations = map[string]string{AnnotationIdleTimeout: "2", "service.beta.kubernetes.io/azure-pip-name": "x"}
			s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "sctp", Port: 81, Protocol: v1.ProtocolSCTP},
				v1.ServicePort{Name: "alt", Port: 8000, TargetPort: intstr.FromInt32(8080)})
		}), rejected: []string{AnnotationIdleTimeout, "protocol SCTP", "spec.ports[http] and spec.ports[alt]"},
			ignored: []string{"service.beta.kubernetes.io/azure-pip-name"},
			spec:    updater.InboundSpec{Ports: []updater.Port{{Protocol: "Tcp", FrontendPort: 80, BackendPort: 8080}}, IdleTimeoutMinutes: 4}},
		{name: "named target port resolved from the slices", wanted: true, eps: named,
			svc:  svc(func(s *v1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("web") }),
			spec: updater.InboundSpec{Ports: []updater.Port{{Protocol: "Tcp", FrontendPort: 80, BackendPort: 9000}}, IdleTimeoutMinutes: 4}},
		{name: "named target port not resolved yet", wanted: true, pending: true,
			svc:  svc(func(s *v1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("web") }),
			spec: updater.InboundSpec{IdleTimeoutMinutes: 4}},
		{name: "named target port resolving differently", wanted: true, rejected: []string{"targetPort \"web\""},
			eps:  append(named, &discoveryv1.EndpointSlice{Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(9001))}}}),
			svc:  svc(func(s *v1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("web") }),
			spec: updater.InboundSpec{IdleTimeoutMinutes: 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Admit(tc.svc, tc.eps)
			if r.Wanted != tc.wanted {
				t.Fatalf("wanted = %t", r.Wanted)
			}
			if !tc.wanted {
				return
			}
			if len(r.Rejected) != len(tc.rejected) {
				t.Fatalf("rejected = %q, want %q", r.Rejected, tc.rejected)
			}
			for i, want := range tc.rejected {
				if !strings.Contains(r.Rejected[i], want) {
					t.Fatalf("rejected[%d] = %q, want it to name %q", i, r.Rejected[i], want)
				}
			}
			if !reflect.DeepEqual(r.Ignored, tc.ignored) || (r.Pending != "") != tc.pending {
				t.Fatalf("ignored = %q pending = %q", r.Ignored, r.Pending)
			}
			if !reflect.DeepEqual(r.Spec, tc.spec) {
				t.Fatalf("spec = %+v, want %+v", r.Spec, tc.spec)
			}
		})
	}
}

func TestMembers(t *testing.T) {
	eps := []*discoveryv1.EndpointSlice{{Endpoints: []discoveryv1.Endpoint{
		{Addresses: []string{"10.244.0.5"}, NodeName: ptr("n1")},                                                                // ready nil counts as ready
		{Addresses: []string{"10.244.0.6"}, NodeName: ptr("n1"), Conditions: discoveryv1.EndpointConditions{Ready: ptr(false)}}, // not ready
		{Addresses: []string{"10.244.1.5"}, NodeName: ptr("n2"), Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}},
		{Addresses: []string{"fd00::5"}, NodeName: ptr("n2")},    // IPv6 pod on a node with an IPv6 address
		{Addresses: []string{"10.244.3.5"}, NodeName: ptr("n3")}, // node without addresses
		{Addresses: []string{"10.244.4.5"}},                      // no node
	}}}
	got := Members(eps, map[string][]string{"n1": {"10.240.0.4"}, "n2": {"10.240.0.5", "fd00:1::5"}})
	want := map[string]string{"10.244.0.5": "10.240.0.4", "10.244.1.5": "10.240.0.5", "fd00::5": "fd00:1::5"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Members = %v", got)
	}
}

func TestEgress(t *testing.T) {
	pod := func(label string, phase v1.PodPhase, ip, host string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{EgressLabel: label}},
			Status: v1.PodStatus{Phase: phase, PodIP: ip, HostIP: host}}
	}
	for label, want := range map[string]bool{"Egress-A": true, "a.b_c-d": true, "default-natgw": false, "-x": false, "x-": false, "": false, "a b": false} {
		if _, ok := EgressIdentity(pod(label, v1.PodRunning, "", "")); ok != want {
			t.Errorf("EgressIdentity(%q) valid = %t", label, ok)
		}
	}
	if id, _ := EgressIdentity(pod("Egress-A", v1.PodRunning, "", "")); id != "egress-a" {
		t.Errorf("identity not lower-cased: %q", id)
	}
	got := EgressMembers([]*v1.Pod{pod("e", v1.PodRunning, "10.244.0.5", "10.240.0.4"), pod("e", v1.PodSucceeded, "10.244.0.6", "10.240.0.4"),
		pod("e", v1.PodPending, "10.244.0.7", ""), pod("e", v1.PodPending, "10.244.0.8", "10.240.0.5")})
	if !reflect.DeepEqual(got, map[string]string{"10.244.0.5": "10.240.0.4", "10.244.0.8": "10.240.0.5"}) {
		t.Fatalf("EgressMembers = %v", got)
	}
}
