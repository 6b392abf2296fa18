package loadbalancer

import (
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
)

func (e *env) getPIP(t *testing.T, name string) armnetwork.PublicIPAddress {
	t.Helper()
	resp, err := e.net.NewPublicIPAddressesClient().Get(ctxT(t), testRG, name, nil)
	if err != nil {
		t.Fatalf("public IP %s: %v", name, err)
	}
	return resp.PublicIPAddress
}

func tagOf(tags map[string]*string, k string) string {
	if v, ok := tags[k]; ok && v != nil {
		return *v
	}
	return "<none>"
}

// Tags changed in the configuration and in azure-pip-tags reach the load balancer, the public
// IP and the NSG on the next reconcile; a key removed from the annotation leaves the public IP;
// a user's own tags survive.
func TestTagsReconciled(t *testing.T) {
	e := newEnv(t, config.BackendPoolNodeIP)
	e.cfg.Tags = "env=prod"
	e.build(t, BuildOptions{})
	ctx := ctxT(t)
	nodes := []*v1.Node{node("n0", "10.240.0.4", nil)}
	svc := service("b1b1b1b1-0000-0000-0000-000000000000", "tagged", map[string]string{annotations.PIPTags: "team=web,cost=42"})
	if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	pipName := naming.PublicIPName(testCluster, naming.ServiceLBName(svc.UID), "", false, naming.IPv4)
	pip := e.getPIP(t, pipName)
	if tagOf(pip.Tags, "env") != "prod" || tagOf(pip.Tags, "team") != "web" || tagOf(pip.Tags, "cost") != "42" {
		t.Fatalf("public IP tags %v", pip.Tags)
	}
	// The user tags all three resources out of band.
	pip.Tags["user"] = to.Ptr("mine")
	if p, err := e.net.NewPublicIPAddressesClient().BeginCreateOrUpdate(ctx, testRG, pipName, pip, nil); err != nil {
		t.Fatal(err)
	} else if _, err := p.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	lb := e.getLB(t, testCluster)
	lb.Tags["user"] = to.Ptr("mine")
	if p, err := e.net.NewLoadBalancersClient().BeginCreateOrUpdate(ctx, testRG, testCluster, *lb, nil); err != nil {
		t.Fatal(err)
	} else if _, err := p.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	nsgResp, err := e.net.NewSecurityGroupsClient().Get(ctx, testRG, "nsg", nil)
	if err != nil {
		t.Fatal(err)
	}
	if tagOf(nsgResp.Tags, "env") != "prod" {
		t.Fatalf("NSG tags %v", nsgResp.Tags)
	}
	nsgResp.Tags["user"] = to.Ptr("mine")
	if p, err := e.net.NewSecurityGroupsClient().BeginCreateOrUpdate(ctx, testRG, "nsg", nsgResp.SecurityGroup, nil); err != nil {
		t.Fatal(err)
	} else if _, err := p.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}

	// The configuration changes (a restart: a fresh writer set) and the annotation drops a key.
	e.cfg.Tags, e.cfg.TagsMap = "env=staging", map[string]string{"owner": "platform"}
	e.build(t, BuildOptions{})
	svc.Annotations[annotations.PIPTags] = "team=api"
	if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	pip = e.getPIP(t, pipName)
	for k, want := range map[string]string{"env": "staging", "owner": "platform", "team": "api", "cost": "<none>", "user": "mine",
		naming.TagService: "default/tagged"} {
		if got := tagOf(pip.Tags, k); got != want {
			t.Errorf("public IP tag %s = %s, want %s (%v)", k, got, want, pip.Tags)
		}
	}
	lb = e.getLB(t, testCluster)
	nsgResp, err = e.net.NewSecurityGroupsClient().Get(ctx, testRG, "nsg", nil)
	if err != nil {
		t.Fatal(err)
	}
	for what, tags := range map[string]map[string]*string{"load balancer": lb.Tags, "NSG": nsgResp.Tags} {
		if tagOf(tags, "env") != "staging" || tagOf(tags, "owner") != "platform" || tagOf(tags, "user") != "mine" {
			t.Errorf("%s tags %v", what, tags)
		}
	}
	// Steady state: nothing left to write.
	before := e.writes(t)
	if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	if d := e.writes(t) - before; d != 0 {
		t.Fatalf("%d writes in the steady state", d)
	}
}

// azure-pip-ip-tags changes on an owned public IP: re-created without in-place mutation (the
// existing provider's way), changed in place with enableIPTagMutationForExistingPublicIP for
// FirstPartyUsage tags, each way in both directions (added, removed).
func TestIPTagChanges(t *testing.T) {
	ipTags := func(p armnetwork.PublicIPAddress) string {
		var out []string
		for _, t := range p.Properties.IPTags {
			out = append(out, *t.IPTagType+"="+*t.Tag)
		}
		return strings.Join(out, ",")
	}
	nodes := []*v1.Node{node("n0", "10.240.0.4", nil)}
	t.Run("re-created", func(t *testing.T) {
		e := newEnv(t, config.BackendPoolNodeIP)
		ctx := ctxT(t)
		svc := service("b2b2b2b2-0000-0000-0000-000000000000", "iptags", nil)
		pipName := naming.PublicIPName(testCluster, naming.ServiceLBName(svc.UID), "", false, naming.IPv4)
		for _, want := range []string{"", "RoutingPreference=Internet", ""} {
			if want != "" || svc.Annotations != nil {
				svc.Annotations = map[string]string{annotations.PIPIPTags: want}
			}
			for len(e.recorder.Events) > 0 {
				<-e.recorder.Events
			}
			st, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes)
			if err != nil {
				t.Fatal(err)
			}
			p := e.getPIP(t, pipName)
			if got := ipTags(p); got != want {
				t.Fatalf("IP tags %q, want %q", got, want)
			}
			if st.Ingress[0].IP != *p.Properties.IPAddress {
				t.Fatalf("status %s, public IP %s", st.Ingress[0].IP, *p.Properties.IPAddress)
			}
			if svc.Annotations != nil && ruleOnLB(e.getLB(t, testCluster), naming.ServiceLBName(svc.UID)) == 0 {
				t.Fatal("the service has no rule after the re-creation")
			}
		}
		recreated := false
		for len(e.recorder.Events) > 0 {
			recreated = recreated || strings.Contains(<-e.recorder.Events, "Warning "+ReasonPublicIPRecreated)
		}
		if !recreated {
			t.Fatal("no PublicIPRecreated event")
		}
	})
	t.Run("in place", func(t *testing.T) {
		e := newEnv(t, config.BackendPoolNodeIP)
		e.cfg.EnableIPTagMutationForExistingPublicIP = true
		e.build(t, BuildOptions{})
		ctx := ctxT(t)
		svc := service("b3b3b3b3-0000-0000-0000-000000000000", "iptags", map[string]string{annotations.PIPIPTags: "FirstPartyUsage=/Prod"})
		pipName := naming.PublicIPName(testCluster, naming.ServiceLBName(svc.UID), "", false, naming.IPv4)
		var addr string
		for _, want := range []string{"FirstPartyUsage=/Prod", "FirstPartyUsage=/NonProd", ""} {
			svc.Annotations[annotations.PIPIPTags] = want
			if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
				t.Fatal(err)
			}
			p := e.getPIP(t, pipName)
			if got := ipTags(p); got != want {
				t.Fatalf("IP tags %q, want %q", got, want)
			}
			if addr == "" {
				addr = *p.Properties.IPAddress
			} else if *p.Properties.IPAddress != addr {
				t.Fatalf("address changed from %s to %s: not in place", addr, *p.Properties.IPAddress)
			}
		}
		// A RoutingPreference change cannot be made in place: Warning, the rest reconciles.
		svc.Annotations[annotations.PIPIPTags] = "RoutingPreference=Internet"
		if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
			t.Fatal(err)
		}
		found := false
		for len(e.recorder.Events) > 0 {
			ev := <-e.recorder.Events
			found = found || (strings.Contains(ev, "Warning "+ReasonIPTagsNotChanged) && strings.Contains(ev, "RoutingPreference"))
		}
		if !found {
			t.Fatal("no IPTagsNotChanged event naming RoutingPreference")
		}
	})
}

func ruleOnLB(lb *armnetwork.LoadBalancer, svcLBName string) int {
	n := 0
	for _, r := range lb.Properties.LoadBalancingRules {
		if strings.HasPrefix(*r.Name, svcLBName) {
			n++
		}
	}
	return n
}

// An edge-zone cluster creates its load balancers and public IPs in the edge zone.
func TestEdgeZoneCluster(t *testing.T) {
	e := newEnv(t, config.BackendPoolNodeIP)
	e.cfg.ExtendedLocationName, e.cfg.ExtendedLocationType = "microsoftlosangeles1", config.ExtendedLocationEdgeZone
	e.build(t, BuildOptions{})
	ctx := ctxT(t)
	nodes := []*v1.Node{node("n0", "10.240.0.4", nil)}
	pub := service("b4b4b4b4-0000-0000-0000-000000000000", "edge", nil)
	in := service("b5b5b5b5-0000-0000-0000-000000000000", "edge-internal", map[string]string{annotations.Internal: "true"})
	for _, s := range []*v1.Service{pub, in} {
		if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, s, nodes); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{testCluster, testCluster + "-internal"} {
		lb := e.getLB(t, name)
		if lb.ExtendedLocation == nil || *lb.ExtendedLocation.Name != "microsoftlosangeles1" {
			t.Fatalf("load balancer %s extended location %+v", name, lb.ExtendedLocation)
		}
	}
	pip := e.getPIP(t, naming.PublicIPName(testCluster, naming.ServiceLBName(pub.UID), "", false, naming.IPv4))
	if pip.ExtendedLocation == nil || *pip.ExtendedLocation.Name != "microsoftlosangeles1" || len(pip.Zones) != 0 {
		t.Fatalf("public IP extended location %+v zones %v", pip.ExtendedLocation, pip.Zones)
	}
}

// TestSystemTagsKeepPrefixedTags: with systemTags, a tag the configuration does not name is
// removed from the load balancer, the NSG and the public IP unless it starts with a systemTags
// key (compared without case): "aks-managed" keeps every aks-managed-* tag, as the existing
// provider matches them.
func TestSystemTagsKeepPrefixedTags(t *testing.T) {
	e := newEnv(t, config.BackendPoolNodeIP)
	e.cfg.Tags = "env=prod"
	e.build(t, BuildOptions{})
	ctx := ctxT(t)
	nodes := []*v1.Node{node("n0", "10.240.0.4", nil)}
	svc := service("b4b4b4b4-0000-0000-0000-000000000000", "system", nil)
	if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	pipName := naming.PublicIPName(testCluster, naming.ServiceLBName(svc.UID), "", false, naming.IPv4)
	outOfBand := map[string]string{"aks-managed-cluster-name": "c1", "AKS-Managed-poolName": "p1", "stray": "x"}
	addTags := func(tags map[string]*string) map[string]*string {
		if tags == nil {
			tags = map[string]*string{}
		}
		for k, v := range outOfBand {
			tags[k] = to.Ptr(v)
		}
		return tags
	}
	pip := e.getPIP(t, pipName)
	pip.Tags = addTags(pip.Tags)
	if p, err := e.net.NewPublicIPAddressesClient().BeginCreateOrUpdate(ctx, testRG, pipName, pip, nil); err != nil {
		t.Fatal(err)
	} else if _, err := p.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	lb := e.getLB(t, testCluster)
	lb.Tags = addTags(lb.Tags)
	if p, err := e.net.NewLoadBalancersClient().BeginCreateOrUpdate(ctx, testRG, testCluster, *lb, nil); err != nil {
		t.Fatal(err)
	} else if _, err := p.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	nsg, err := e.net.NewSecurityGroupsClient().Get(ctx, testRG, "nsg", nil)
	if err != nil {
		t.Fatal(err)
	}
	nsg.Tags = addTags(nsg.Tags)
	if p, err := e.net.NewSecurityGroupsClient().BeginCreateOrUpdate(ctx, testRG, "nsg", nsg.SecurityGroup, nil); err != nil {
		t.Fatal(err)
	} else if _, err := p.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}

	// A restart with systemTags set (a fresh writer set reads what is on Azure).
	e.cfg.SystemTags = "aks-managed"
	e.build(t, BuildOptions{})
	if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	lb = e.getLB(t, testCluster)
	nsg, err = e.net.NewSecurityGroupsClient().Get(ctx, testRG, "nsg", nil)
	if err != nil {
		t.Fatal(err)
	}
	pip = e.getPIP(t, pipName)
	for what, tags := range map[string]map[string]*string{"load balancer": lb.Tags, "NSG": nsg.Tags, "public IP": pip.Tags} {
		for k, want := range map[string]string{"env": "prod", "aks-managed-cluster-name": "c1", "AKS-Managed-poolName": "p1", "stray": "<none>"} {
			if got := tagOf(tags, k); got != want {
				t.Errorf("%s tag %s = %s, want %s (%v)", what, k, got, want, tags)
			}
		}
	}
	if tagOf(pip.Tags, naming.TagService) != "default/system" {
		t.Errorf("the public IP lost its service tag: %v", pip.Tags)
	}
	// Steady state: nothing left to write.
	before := e.writes(t)
	if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	if d := e.writes(t) - before; d != 0 {
		t.Fatalf("%d writes in the steady state", d)
	}
}
