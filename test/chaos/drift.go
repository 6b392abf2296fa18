package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/azsim/drift"
	"github.com/azure-ccm/azure-ccm/test/framework/azurenames"
)

// driftProbeInterval is the interval a changed probe gets (the CCM's is 5 s).
const driftProbeInterval = 15

// injectDrift makes one third-party edit (azsim drift) to a random service's Azure objects: a
// rule deleted, a probe changed, an NSG rule removed, a pool member removed or the frontend
// pointed at another public IP. The CCM's drift audit must repair it (the invariants check the
// end state), and never for a service that is gone.
func (r *run) injectDrift(ctx context.Context, svcs []corev1.Service) {
	var ready []corev1.Service
	for _, s := range svcs {
		if s.DeletionTimestamp == nil && len(s.Status.LoadBalancer.Ingress) > 0 && s.Status.LoadBalancer.Ingress[0].IP != "" {
			ready = append(ready, s)
		}
	}
	if len(ready) == 0 {
		return
	}
	s := ready[r.rng.IntN(len(ready))]
	kinds := drift.Kinds
	kind := kinds[r.rng.IntN(len(kinds))]
	req, ok, err := r.driftRequest(ctx, s, kind)
	if err != nil || !ok {
		r.ops["drift skipped"]++
		return
	}
	if _, err := r.e.Azsim.Drift(ctx, req); err != nil {
		// The service may be going (its load balancer rewritten meanwhile): not an error of the
		// CCM.
		r.ops["drift failed"]++
		r.journal("drift %s on %s (%s) failed: %v", kind, s.Name, req.Name, err)
		return
	}
	r.ops["drift "+string(kind)]++
	r.journal("drift %s on %s uid=%s: %s %s", kind, s.Name, s.UID, req.Name, req.Pool)
}

// driftRequest targets kind at service s; ok is false when it does not apply (no TCP port for
// a probe, no NSG rule of an internal service without source ranges, an internal frontend).
func (r *run) driftRequest(ctx context.Context, s corev1.Service, kind drift.Kind) (drift.Request, bool, error) {
	a := r.e.Azure
	base := "/subscriptions/" + a.SubscriptionID + "/resourceGroups/" + a.ResourceGroup + "/providers/Microsoft.Network/"
	internal := s.Annotations[annInternal] == "true"
	lbID := base + "loadBalancers/" + azurenames.LoadBalancerName(clusterName, internal)
	svcLB := azurenames.ServiceLBName(s.UID)
	ports := s.Spec.Ports
	switch kind {
	case drift.DeleteRule:
		p := ports[r.rng.IntN(len(ports))]
		return drift.Request{Kind: kind, Resource: lbID, Name: azurenames.RuleName(svcLB, "", p.Protocol, p.Port, false, azurenames.IPv4)}, true, nil
	case drift.ChangeProbe:
		var tcp []corev1.ServicePort
		for _, p := range ports {
			if p.Protocol == corev1.ProtocolTCP {
				tcp = append(tcp, p)
			}
		}
		if len(tcp) == 0 {
			return drift.Request{}, false, nil
		}
		p := tcp[r.rng.IntN(len(tcp))]
		return drift.Request{Kind: kind, Resource: lbID, Name: azurenames.RuleName(svcLB, "", p.Protocol, p.Port, false, azurenames.IPv4),
			IntervalInSeconds: driftProbeInterval}, true, nil
	case drift.RemoveNSGRule:
		nsg, err := r.e.Azsim.Get(ctx, base+"networkSecurityGroups/"+a.SecurityGroupName)
		if err != nil {
			return drift.Request{}, false, err
		}
		ip := s.Status.LoadBalancer.Ingress[0].IP
		var rules []string
		for _, rule := range arr(nsg, "properties", "securityRules") {
			name := str(rule, "name")
			if strings.HasPrefix(name, "k8s-azure-lb_") && slices.Contains(listOrOne(obj(rule, "properties"), "destinationAddressPrefixes", "destinationAddressPrefix"), ip) {
				rules = append(rules, name)
			}
		}
		if len(rules) == 0 {
			return drift.Request{}, false, nil
		}
		return drift.Request{Kind: kind, Resource: base + "networkSecurityGroups/" + a.SecurityGroupName, Name: rules[r.rng.IntN(len(rules))]}, true, nil
	case drift.RemovePoolMember:
		lb, err := r.e.Azsim.Get(ctx, lbID)
		if err != nil {
			return drift.Request{}, false, err
		}
		pool := azurenames.BackendPoolName(clusterName, azurenames.IPv4)
		var members []string
		for _, p := range arr(lb, "properties", "backendAddressPools") {
			if !strings.EqualFold(str(p, "name"), pool) {
				continue
			}
			for _, e := range arr(p, "properties", "loadBalancerBackendAddresses") {
				members = append(members, str(e, "properties", "ipAddress"))
			}
			for _, ref := range arr(p, "properties", "backendIPConfigurations") {
				members = append(members, str(ref, "id"))
			}
		}
		if len(members) == 0 {
			return drift.Request{}, false, nil
		}
		return drift.Request{Kind: kind, Resource: lbID, Pool: pool, Name: members[r.rng.IntN(len(members))]}, true, nil
	case drift.ChangeFrontendIP:
		if internal {
			return drift.Request{}, false, nil
		}
		return drift.Request{Kind: kind, Resource: lbID, Name: azurenames.FrontendName(svcLB, "", false, azurenames.IPv4)}, true, nil
	}
	return drift.Request{}, false, fmt.Errorf("unknown drift kind %s", kind)
}

// driftRepairs reads the CCM's count of repaired objects (its /metrics), for the run's summary.
func driftRepairs(ctx context.Context, r *run) string {
	text, err := r.e.CCMMetrics(ctx)
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "azure_ccm_drift_repaired_total{") || strings.HasPrefix(line, "azure_ccm_drift_audit_services_total{") {
			out = append(out, line)
		}
	}
	if len(out) == 0 {
		return "none since the last CCM start"
	}
	return strings.Join(out, "; ")
}
