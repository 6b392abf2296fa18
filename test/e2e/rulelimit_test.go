package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/test/framework/azurenames"
)

// rulePortsN are n TCP ports 1000, 1001, … for one service.
func rulePortsN(n int) []corev1.ServicePort {
	out := make([]corev1.ServicePort, n)
	for i := range out {
		out[i] = lbTCP(int32(1000 + i))
	}
	return out
}

// TestLoadBalancerRuleLimit: with "maximumLoadBalancerRuleCount": 250 in azure.json, 300
// single-port services put 300 rules on the one Standard load balancer and all get an IP (the
// existing provider applies the key only among Basic load balancers). A service that would make
// 1,501 rules is refused with a Warning event naming Azure's limit, gets no IP, and its public
// IP does not exist, on the first refusal and on the retries. The cluster's service range is a
// /22: kube-apiserver's default /24 has too few cluster IPs for 301 services.
func TestLoadBalancerRuleLimit(t *testing.T) {
	working(t)
	l := lbStart(t, lbOptions{CloudConfig: map[string]any{
		"loadBalancerBackendPoolConfigurationType": "nodeIP", "maximumLoadBalancerRuleCount": 250},
		ClusterArgs: []string{"kube-apiserver=service-cluster-ip-range=10.0.0.0/22", "kube-controller-manager=service-cluster-ip-range=10.0.0.0/22"}})
	const services, ports = 300, 1
	for i := 0; i < services; i++ {
		l.create(lbService(fmt.Sprintf("rules-%d", i), nil, rulePortsN(ports)...))
	}
	for i := 0; i < services; i++ {
		l.waitIP(fmt.Sprintf("rules-%d", i))
	}
	if n := len(l.mustState().LBs[lbCluster].Properties.LoadBalancingRules); n != services*ports {
		t.Fatalf("%d rules on %s, want %d", n, lbCluster, services*ports)
	}

	big := l.create(lbService("rules-big", nil, rulePortsN(1500-services*ports+1)...))
	svcLB := azurenames.ServiceLBName(big.UID)
	key := azurenames.ServiceKey(big.Namespace, big.Name)
	// The recorder counts repeats of one event: two refusals are the first reconcile and a retry.
	var msg string
	l.waitFor("two rule-limit refusals of rules-big", func(ctx context.Context) (bool, error) {
		evs, err := l.warningEvents(ctx, big.Name)
		if err != nil {
			return false, err
		}
		for _, e := range evs {
			if e.Reason == "LoadBalancerRuleLimitReached" && e.Count >= 2 {
				msg = e.Message
				return true, nil
			}
		}
		return false, nil
	}, lbWait)
	if !strings.Contains(msg, "would have 1501 load balancing rules, more than Azure's limit of 1500 per Standard load balancer") {
		t.Fatalf("refusal %q does not name 1,501 rules and Azure's limit", msg)
	}
	st := l.mustState()
	for name, p := range st.PIPs {
		v, _ := azurenames.ServiceTagValue(p.Tags)
		if strings.Contains(name, svcLB) || slices.Contains(azurenames.ParseServiceTag(v), key) {
			t.Fatalf("the refused service has public IP %s", name)
		}
	}
	if n := len(st.LBs[lbCluster].Properties.LoadBalancingRules); n != services*ports {
		t.Fatalf("%d rules on %s after the refusal, want %d", n, lbCluster, services*ports)
	}
	if ips := ingressIPs(l.get(big.Name)); len(ips) != 0 {
		t.Fatalf("the refused service has ingress %v", ips)
	}
}
