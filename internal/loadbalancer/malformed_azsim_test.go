package loadbalancer

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
)

// Malformed Services: each is refused with an error and a Warning event that name the
// annotation or field and its value, and costs no ARM write.
func TestMalformedServicesWriteNothing(t *testing.T) {
	e := newEnv(t, config.BackendPoolNodeIP)
	for i, tc := range []struct {
		name   string
		ann    map[string]string
		mutate func(*v1.Service)
		field  string // named in the error and the event
		value  string
	}{
		{"idle timeout out of range", map[string]string{annotations.TCPIdleTimeout: "1000"}, nil, annotations.TCPIdleTimeout, "1000"},
		{"idle timeout not a number", map[string]string{annotations.TCPIdleTimeout: "ten"}, nil, annotations.TCPIdleTimeout, "ten"},
		{"probe interval not a number", map[string]string{annotations.ProbeInterval: "5s"}, nil, annotations.ProbeInterval, "5s"},
		{"probe protocol unknown", map[string]string{annotations.ProbeProtocol: "icmp"}, nil, annotations.ProbeProtocol, "icmp"},
		{"per-port probe protocol unknown", map[string]string{annotations.PortProbeKey(80, annotations.PortProbeProtocol): "ftp"}, nil, annotations.PortProbeKey(80, annotations.PortProbeProtocol), "ftp"},
		{"internal not a boolean", map[string]string{annotations.Internal: "yes please"}, nil, annotations.Internal, "yes please"},
		{"PIP name invalid", map[string]string{annotations.PIPName: "-bad"}, nil, annotations.PIPName, "-bad"},
		{"resource group invalid", map[string]string{annotations.ResourceGroup: "rg."}, nil, annotations.ResourceGroup, "rg."},
		{"additional public IP invalid", map[string]string{annotations.AdditionalPublicIPs: "1.2.3.4,x"}, nil, annotations.AdditionalPublicIPs, "x"},
		{"service tag invalid", map[string]string{annotations.AllowedServiceTags: "Azure Cloud"}, nil, annotations.AllowedServiceTags, "Azure Cloud"},
		{"spec.loadBalancerIP invalid", nil, func(s *v1.Service) { s.Spec.LoadBalancerIP = "nope" }, "spec.loadBalancerIP", "nope"},
		{"per-port probe port out of range", map[string]string{annotations.PortProbeKey(80, annotations.PortProbePort): "0"}, nil, annotations.PortProbeKey(80, annotations.PortProbePort), "0"},
		{"private spec.loadBalancerIP on a public service", nil, func(s *v1.Service) { s.Spec.LoadBalancerIP = "10.0.0.5" }, "spec.loadBalancerIP", "10.0.0.5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			svc := service("dddddddd-0000-0000-0000-0000000000"+string(rune('a'+i/10))+string(rune('0'+i%10)), "bad", tc.ann)
			if tc.mutate != nil {
				tc.mutate(svc)
			}
			for len(e.recorder.Events) > 0 {
				<-e.recorder.Events
			}
			before := e.writes(t)
			_, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, []*v1.Node{node("n0", "10.240.0.4", nil)})
			if err == nil || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.value) {
				t.Fatalf("error %v, want one naming %s and %q", err, tc.field, tc.value)
			}
			select {
			case ev := <-e.recorder.Events:
				if !strings.Contains(ev, "Warning "+ReasonInvalidAnnotation) || !strings.Contains(ev, tc.field) || !strings.Contains(ev, tc.value) {
					t.Errorf("event %q does not name %s=%q", ev, tc.field, tc.value)
				}
			default:
				t.Error("no Warning event")
			}
			if after := e.writes(t); after != before {
				t.Errorf("malformed service caused %d ARM writes", after-before)
			}
		})
	}
}

// Errors name the service once, and where users match on the existing provider's message it
// follows that name.
func TestErrorsNameTheServiceOnce(t *testing.T) {
	e := newEnv(t, config.BackendPoolNodeIP)
	nodes := []*v1.Node{node("n0", "10.240.0.4", nil)}
	for i, tc := range []struct {
		name   string
		ann    map[string]string
		mutate func(*v1.Service)
		want   string // the whole message opens with it
	}{
		{"private loadBalancerIP on a public service", nil, func(s *v1.Service) { s.Spec.LoadBalancerIP = "10.0.0.5" },
			`service default/x: external Service "default/x" cannot use non-public LoadBalancer IP "10.0.0.5"; use an internal LoadBalancer annotation or a valid Azure Public IP address: `},
		{"probe port out of range", map[string]string{annotations.PortProbeKey(80, annotations.PortProbePort): "70000"}, nil,
			"service default/x: failed to parse annotation service.beta.kubernetes.io/port_80_health-probe_port: port 70000 is out of range: "},
		{"no public IP with the address", map[string]string{annotations.IPv4: "198.51.100.77"}, nil,
			"service default/x: no public IP with address 198.51.100.77 exists in the public IP resource group"},
		{"no public IP of the name", map[string]string{annotations.PIPName: "nope"}, nil,
			`service default/x: public IP "nope" (from the pip-name annotation) does not exist`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := service("dfdfdfdf-0000-0000-0000-00000000000"+string(rune('0'+i)), "x", tc.ann)
			if tc.mutate != nil {
				tc.mutate(svc)
			}
			_, err := e.lb.EnsureLoadBalancer(ctxT(t), testCluster, svc, nodes)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to open with %q", err, tc.want)
			}
			if n := strings.Count(err.Error(), "service default/x"); n != 1 {
				t.Fatalf("the service is named %d times: %q", n, err)
			}
		})
	}
}
