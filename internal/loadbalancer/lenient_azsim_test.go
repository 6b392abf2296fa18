package loadbalancer

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
)

// Manifests the existing provider accepts converge here too, with a Warning event naming the
// part that is not applied as written.
func TestFormerlyRefusedManifestsConverge(t *testing.T) {
	e := newEnv(t, config.BackendPoolNodeIP)
	ctx := ctxT(t)
	nodes := []*v1.Node{node("n0", "10.240.0.4", nil)}
	drainEvents := func() []string {
		var out []string
		for len(e.recorder.Events) > 0 {
			out = append(out, <-e.recorder.Events)
		}
		return out
	}
	warned := func(t *testing.T, events []string, reason, key, value string) {
		t.Helper()
		for _, ev := range events {
			if strings.Contains(ev, "Warning "+reason) && strings.Contains(ev, key) && strings.Contains(ev, value) {
				return
			}
		}
		t.Fatalf("no Warning %s naming %s=%q in %v", reason, key, value, events)
	}

	t.Run("probe port that is no service port", func(t *testing.T) {
		key := annotations.PortProbeKey(80, annotations.PortProbePort)
		svc := service("eeeeeeee-0000-0000-0000-000000000001", "probe", map[string]string{key: "10256"})
		drainEvents()
		if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
			t.Fatal(err)
		}
		warned(t, drainEvents(), annotations.ReasonProbePortNotServicePort, key, "10256")
		lb := e.getLB(t, testCluster)
		probe := naming.ServiceLBName(svc.UID) + "-TCP-80"
		for _, p := range lb.Properties.Probes {
			if *p.Name == probe {
				if *p.Properties.Port != 10256 {
					t.Fatalf("probe port %d, want 10256", *p.Properties.Port)
				}
				return
			}
		}
		t.Fatalf("probe %s missing", probe)
	})

	t.Run("one malformed source range", func(t *testing.T) {
		svc := service("eeeeeeee-0000-0000-0000-000000000002", "ranges", map[string]string{annotations.AllowedIPRanges: "10.0.0.0/8,10.0.0.0/x"})
		drainEvents()
		st, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes)
		if err != nil {
			t.Fatal(err)
		}
		warned(t, drainEvents(), annotations.ReasonSourceRangeIgnored, annotations.AllowedIPRanges, "10.0.0.0/x")
		ip := st.Ingress[0].IP
		var allowed, internet, denied bool
		for _, r := range e.nsgRules(t) {
			p := r.Properties
			if p.DestinationAddressPrefix == nil || *p.DestinationAddressPrefix != ip {
				continue
			}
			switch {
			case *p.Access == "Deny":
				denied = true
			case p.SourceAddressPrefix != nil && *p.SourceAddressPrefix == "Internet":
				internet = true
			case p.SourceAddressPrefix != nil && *p.SourceAddressPrefix == "10.0.0.0/8":
				allowed = true
			}
		}
		if !allowed || internet || !denied {
			t.Fatalf("NSG for %s: range allowed %v, Internet %v, deny-all %v; want true false true", ip, allowed, internet, denied)
		}
	})
}
