package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/test/framework"
	"github.com/azure-ccm/azure-ccm/test/framework/azurenames"
)

// TestLoadBalancerLenientInputs: inputs the existing provider accepts (overlapping source
// ranges, malformed azure-pip-tags pairs) reach Azure as it writes them, and the mistakes it
// refuses are reported in its words, naming the service once.
func TestLoadBalancerLenientInputs(t *testing.T) {
	working(t)
	l := lbStart(t, lbOptions{CloudConfig: lbNodeIPConfig})
	t.Run("overlapping and repeated source ranges", func(t *testing.T) { lbTestAggregatedRanges(l.with(t)) })
	t.Run("malformed azure-pip-tags pairs", func(t *testing.T) { lbTestPIPTags(l.with(t)) })
	t.Run("messages of the existing provider", func(t *testing.T) { lbTestMessages(l.with(t)) })
}

// warned holds when the service has a Warning event with the reason whose message contains
// text.
func (l *lbEnv) warned(name, reason, text string) framework.Condition {
	return func(ctx context.Context) (bool, error) {
		evs, err := l.warningEvents(ctx, name)
		if err != nil {
			return false, err
		}
		var seen []string
		for _, ev := range evs {
			if ev.Reason == reason && strings.Contains(ev.Message, text) {
				return true, nil
			}
			seen = append(seen, ev.Reason+": "+ev.Message)
		}
		return false, fmt.Errorf("no Warning %s with %q on %s; have %q", reason, text, name, seen)
	}
}

// lbTestAggregatedRanges: six ranges, some inside others and one given twice (NRP refuses the
// rule as written), become one rule with exactly the two that cover them.
func lbTestAggregatedRanges(l *lbEnv) {
	svc := lbService("nsg-ranges", nil)
	svc.Spec.LoadBalancerSourceRanges = []string{"10.20.0.0/16", "192.168.0.1/32", "10.20.8.0/24", "10.20.9.0/25", "10.20.8.1/32", "192.168.0.1/32"}
	l.create(svc)
	ip := ingressIPs(l.waitIP(svc.Name))[0]
	var rule *armnetwork.SecurityRule
	l.waitFor("one NSG rule for "+ip, func(ctx context.Context) (bool, error) {
		st, err := l.state(ctx)
		if err != nil {
			return false, err
		}
		names := nsgRulesTo(st.NSG, ip)
		if len(names) != 1 {
			return false, fmt.Errorf("rules to %s: %v", ip, names)
		}
		rule = nsgRule(st.NSG, names[0])
		return true, nil
	}, lbWait)
	p := rule.Properties
	if p.SourceAddressPrefix != nil && *p.SourceAddressPrefix != "" {
		l.t.Fatalf("single source %q, want the list", *p.SourceAddressPrefix)
	}
	// As written, in this order: the list is the aggregate, sorted.
	if got := strings.Join(strs2(p.SourceAddressPrefixes), ", "); got != "10.20.0.0/16, 192.168.0.1/32" {
		l.t.Fatalf("sources %q, want %q", got, "10.20.0.0/16, 192.168.0.1/32")
	}
	if *p.Access != armnetwork.SecurityRuleAccessAllow || !slices.Equal(ruleDestinations(rule), []string{ip}) || !slices.Equal(rulePorts(rule), []string{"80"}) {
		l.t.Fatalf("rule %s: access %s, destinations %v, ports %v", *rule.Name, *p.Access, ruleDestinations(rule), rulePorts(rule))
	}
	l.deleteAndWaitGone(l.get(svc.Name))
}

// strs2 are the values in their order.
func strs2(ps []*string) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, *p)
	}
	return out
}

// lbTestPIPTags: a pair without a key is skipped with a Warning naming it; the service gets its
// IP and the public IP the other tags.
func lbTestPIPTags(l *lbEnv) {
	svc := l.create(lbService("pip-tags", map[string]string{annotations.PIPTags: "a=b,c= d,e =, =f"}))
	l.waitIP(svc.Name)
	l.waitFor("Warning naming =f", l.warned(svc.Name, annotations.ReasonPIPTagIgnored, `" =f"`), lbWait)
	name := l.rg + "/" + azurenames.PublicIPName(lbCluster, azurenames.ServiceLBName(svc.UID), "", false, azurenames.IPv4)
	l.waitFor("tags on "+name, func(ctx context.Context) (bool, error) {
		st, err := l.state(ctx)
		if err != nil {
			return false, err
		}
		p := st.PIPs[name]
		if p == nil {
			return false, fmt.Errorf("public IP %s missing; have %v", name, sortedKeys(st.PIPs))
		}
		for k, v := range map[string]string{"a": "b", "c": "d", "e": ""} {
			if got, ok := p.Tags[k]; !ok || got == nil || *got != v {
				return false, fmt.Errorf("tag %s = %q (present: %t), want %q", k, deref(got), ok, v)
			}
		}
		for k := range p.Tags {
			if strings.TrimSpace(k) == "" || k == "f" {
				return false, fmt.Errorf("tag %q written", k)
			}
		}
		return true, nil
	}, lbWait)
	l.deleteAndWaitGone(l.get(svc.Name))
}

// lbTestMessages: a private loadBalancerIP on a public service and an out-of-range probe port
// are refused with the existing provider's message, and the service controller's event names
// the service once.
func lbTestMessages(l *lbEnv) {
	priv := lbService("private-ip", nil)
	priv.Spec.LoadBalancerIP = "10.0.0.5"
	l.create(priv)
	const nonPublic = `external Service "default/private-ip" cannot use non-public LoadBalancer IP "10.0.0.5"; use an internal LoadBalancer annotation or a valid Azure Public IP address`
	l.waitFor("InvalidAnnotation on private-ip", l.warned(priv.Name, "InvalidAnnotation", nonPublic), lbWait)
	l.waitFor("SyncLoadBalancerFailed on private-ip", l.warned(priv.Name, "SyncLoadBalancerFailed", "service default/private-ip: "+nonPublic), lbWait)

	probe := l.create(lbService("probe-port", map[string]string{annotations.PortProbeKey(80, annotations.PortProbePort): "70000"}))
	const outOfRange = "failed to parse annotation service.beta.kubernetes.io/port_80_health-probe_port: port 70000 is out of range"
	l.waitFor("SyncLoadBalancerFailed on probe-port", l.warned(probe.Name, "SyncLoadBalancerFailed", "service default/probe-port: "+outOfRange), lbWait)

	for _, name := range []string{priv.Name, probe.Name} {
		evs, err := l.warningEvents(lbCtx(l.t), name)
		if err != nil {
			l.t.Fatal(err)
		}
		for _, ev := range evs {
			if n := strings.Count(ev.Message, "service default/"+name); n > 1 {
				l.t.Fatalf("%s %s names the service %d times: %q", name, ev.Reason, n, ev.Message)
			}
		}
		l.deleteAndWaitGone(l.get(name))
	}
}
