package plan

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
)

var metavNow = metav1.Now()

// lbWith is a load balancer whose frontends are given as name → public IP name or private
// address, and whose rules (name → frontend) use them.
func lbWith(fes map[string]string, rules map[string]string) *armnetwork.LoadBalancer {
	lb := &armnetwork.LoadBalancer{Properties: &armnetwork.LoadBalancerPropertiesFormat{}}
	for name, ip := range fes {
		fp := &armnetwork.FrontendIPConfigurationPropertiesFormat{}
		if _, err := netip.ParseAddr(ip); err == nil {
			fp.PrivateIPAddress = to.Ptr(ip)
		} else {
			fp.PublicIPAddress = &armnetwork.PublicIPAddress{ID: to.Ptr(pipRG + ip)}
		}
		lb.Properties.FrontendIPConfigurations = append(lb.Properties.FrontendIPConfigurations,
			&armnetwork.FrontendIPConfiguration{Name: to.Ptr(name), Properties: fp})
	}
	for name, fe := range rules {
		lb.Properties.LoadBalancingRules = append(lb.Properties.LoadBalancingRules, &armnetwork.LoadBalancingRule{Name: to.Ptr(name),
			Properties: &armnetwork.LoadBalancingRulePropertiesFormat{FrontendIPConfiguration: &armnetwork.SubResource{ID: to.Ptr(lbID + "/frontendIPConfigurations/" + fe)}}})
	}
	return lb
}

func frontendSet(fes []*armnetwork.FrontendIPConfiguration) []string {
	var out []string
	for _, fe := range fes {
		out = append(out, *fe.Name)
	}
	return out
}

func TestServiceFrontendQueries(t *testing.T) {
	lb := lbWith(map[string]string{svcA: "pip-a", svcB: "10.1.0.5", "shared-fe": "pip-shared"},
		map[string]string{svcA + "-TCP-80": svcA, svcB + "-TCP-80": "shared-fe"})
	pipAddrs := map[string]netip.Addr{}
	for id, a := range PublicIPAddresses([]*armnetwork.PublicIPAddress{
		{ID: to.Ptr(pipRG + "PIP-A"), Properties: &armnetwork.PublicIPAddressPropertiesFormat{IPAddress: to.Ptr("203.0.113.1")}},
		{ID: to.Ptr(pipRG + "pip-none"), Properties: &armnetwork.PublicIPAddressPropertiesFormat{}},
	}) {
		pipAddrs[id] = a
	}
	for _, tc := range []struct {
		name, svc    string
		ips          string
		hasObjects   bool
		sharedFronts []Frontend
		shared       string
	}{
		{name: "public frontend, address looked up case-insensitively", svc: svcA, ips: "[203.0.113.1]", hasObjects: true,
			sharedFronts: []Frontend{{Family: naming.IPv4, PublicIPID: pipRG + "pip-shared"}}, shared: "[" + svcA + " shared-fe]"},
		{name: "private frontend; a rule on another frontend makes that one shared", svc: svcB, ips: "[10.1.0.5]", hasObjects: true,
			sharedFronts: []Frontend{{Family: naming.IPv4, PrivateIP: netip.MustParseAddr("10.1.0.5")}}, shared: "[" + svcB + " shared-fe]"},
		{name: "nothing of the service", svc: "anothersvc", ips: "[]", shared: "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fmt.Sprint(ServiceIPs(lb, tc.svc, pipAddrs)); got != tc.ips {
				t.Errorf("ServiceIPs %s, want %s", got, tc.ips)
			}
			if got := HasServiceObjects(lb, tc.svc); got != tc.hasObjects {
				t.Errorf("HasServiceObjects %v", got)
			}
			got := frontendSet(SharedFrontends(lb, tc.svc, tc.sharedFronts))
			if fmt.Sprint(slices.Sorted(slices.Values(got))) != tc.shared {
				t.Errorf("SharedFrontends %v, want %s", got, tc.shared)
			}
		})
	}
	if HasServiceObjects(nil, svcA) || ServiceIPs(nil, svcA, nil) != nil {
		t.Error("a missing load balancer holds nothing")
	}
}

func TestFrontendPublicIPGroups(t *testing.T) {
	other := func(name string) *armnetwork.FrontendIPConfiguration {
		return &armnetwork.FrontendIPConfiguration{Name: to.Ptr(name), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{
			PublicIPAddress: &armnetwork.PublicIPAddress{ID: to.Ptr("/subscriptions/sub/resourceGroups/RG-Other/providers/Microsoft.Network/publicIPAddresses/" + name)}}}
	}
	withOther := func(lb *armnetwork.LoadBalancer, names ...string) *armnetwork.LoadBalancer {
		for _, n := range names {
			lb.Properties.FrontendIPConfigurations = append(lb.Properties.FrontendIPConfigurations, other(n))
		}
		return lb
	}
	for _, tc := range []struct {
		name string
		lbs  []*armnetwork.LoadBalancer
		svc  string
		want string
	}{
		{name: "its public frontend", lbs: []*armnetwork.LoadBalancer{lbWith(map[string]string{svcA: "pip-a"}, nil)}, svc: svcA, want: "[rg]"},
		{name: "a private frontend has none", lbs: []*armnetwork.LoadBalancer{lbWith(map[string]string{svcB: "10.1.0.5"}, nil)}, svc: svcB, want: "[]"},
		{name: "a shared frontend its rules use", lbs: []*armnetwork.LoadBalancer{lbWith(map[string]string{"shared-fe": "pip-shared"},
			map[string]string{svcB + "-TCP-80": "shared-fe"})}, svc: svcB, want: "[rg]"},
		{name: "another service's frontend is not its", lbs: []*armnetwork.LoadBalancer{lbWith(map[string]string{svcA: "pip-a"}, nil)}, svc: svcB, want: "[]"},
		{name: "every load balancer, each group once, case-insensitively", lbs: []*armnetwork.LoadBalancer{
			withOther(lbWith(map[string]string{svcA: "pip-a"}, nil), svcA+"-IPv6"), nil,
			withOther(lbWith(nil, nil), svcA+"-2"),
			{Properties: &armnetwork.LoadBalancerPropertiesFormat{FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{
				{Name: to.Ptr(svcA + "-3"), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{
					PublicIPAddress: &armnetwork.PublicIPAddress{ID: to.Ptr("/subscriptions/sub/resourceGroups/rg-other/providers/Microsoft.Network/publicIPAddresses/x")}}}}}},
		}, svc: svcA, want: "[rg RG-Other]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fmt.Sprint(FrontendPublicIPGroups(tc.lbs, tc.svc)); got != tc.want {
				t.Errorf("FrontendPublicIPGroups %s, want %s", got, tc.want)
			}
		})
	}
}

func TestKeepPrivateIPs(t *testing.T) {
	have := lbWith(map[string]string{"v4": "10.1.0.7", "v6": "fd00::7"}, nil).Properties.FrontendIPConfigurations
	requested := netip.MustParseAddr("10.1.0.99")
	for _, tc := range []struct {
		name   string
		fronts []Frontend
		out    string
	}{
		{"dual-stack keeps both", []Frontend{{Family: naming.IPv4}, {Family: naming.IPv6}}, "[10.1.0.7 fd00::7]"},
		{"a requested address wins", []Frontend{{Family: naming.IPv4, PrivateIP: requested}}, "[10.1.0.99]"},
		{"nothing held: dynamic", []Frontend{{Family: naming.IPv4}}, "[10.1.0.7]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			KeepPrivateIPs(tc.fronts, have)
			var got []netip.Addr
			for _, f := range tc.fronts {
				got = append(got, f.PrivateIP)
			}
			if fmt.Sprint(got) != tc.out {
				t.Errorf("%v, want %s", got, tc.out)
			}
		})
	}
	fronts := []Frontend{{Family: naming.IPv4}}
	KeepPrivateIPs(fronts, nil)
	if fronts[0].PrivateIP.IsValid() {
		t.Error("no frontend held: the address must stay dynamic")
	}
}

func TestRuleCount(t *testing.T) {
	for _, tc := range []struct {
		opts []svcOpt
		want int
	}{
		{nil, 1},
		{[]svcOpt{withPorts(tcp(80, 30080), udp(53, 30053))}, 2},
		{[]svcOpt{withPorts(tcp(80, 30080), tcp(443, 30443)), dualStack}, 4},
		{[]svcOpt{withPorts()}, 0},
		{[]svcOpt{withPorts(tcp(80, 30080), tcp(443, 30443)), withAnn(annotations.PortNoLBRuleKey(443), "true")}, 1},
		{[]svcOpt{withPorts(tcp(80, 30080)), withAnn(annotations.PortNoLBRuleKey(80), "true")}, 0},
		{[]svcOpt{withPorts(tcp(80, 30080), tcp(443, 30443)), withAnn(annotations.HAPorts, "true"), withAnn(annotations.Internal, "true"), dualStack}, 2},
		{[]svcOpt{withPorts(tcp(80, 30080), tcp(443, 30443)), withAnn(annotations.Internal, "true"), withAnn(annotations.HAPorts, "true")}, 1},
	} {
		if got := RuleCount(mkService(t, uidA, "a", tc.opts...)); got != tc.want {
			t.Errorf("%v: %d rules, want %d", tc.opts, got, tc.want)
		}
	}
}

func TestLoadBalancerIDs(t *testing.T) {
	cfg := &config.Config{SubscriptionID: "s", ResourceGroup: "rg", MultipleStandardLoadBalancerConfigurations: []config.MultipleStandardLoadBalancerConfiguration{
		{Name: "kubernetes"}, {Name: "lb2"}}}
	got := LoadBalancerIDs(cfg, "kubernetes")
	want := []string{"kubernetes", "kubernetes-internal", "lb2", "lb2-internal"}
	if len(got) != len(want) {
		t.Fatalf("%v", got)
	}
	for i, id := range got {
		if id != "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/"+want[i] {
			t.Errorf("%d: %s", i, id)
		}
	}
	cfg.LoadBalancerName, cfg.MultipleStandardLoadBalancerConfigurations = "custom", nil
	if got := LoadBalancerIDs(cfg, "kubernetes"); len(got) != 2 || got[1] != "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/custom-internal" {
		t.Errorf("loadBalancerName: %v", got)
	}
}

func TestConfigTags(t *testing.T) {
	for _, tc := range []struct {
		tags string
		m    map[string]string
		out  string
	}{
		{"", nil, "map[]"},
		{"a=1, b = 2 ,=x,junk", nil, "map[a:1 b:2]"},
		{"a=1", map[string]string{"a": "map wins", "c": "3"}, "map[a:map wins c:3]"},
	} {
		if got := fmt.Sprint(ConfigTags(&config.Config{Tags: tc.tags, TagsMap: tc.m})); got != tc.out {
			t.Errorf("%q %v: %s, want %s", tc.tags, tc.m, got, tc.out)
		}
	}
}

func TestCheckRuleLimit(t *testing.T) {
	for _, tc := range []struct {
		before, after, max int
		wantErr            bool
	}{
		{0, 10, 10, false},
		{10, 11, 10, true},
		{9, 12, 10, true},
		{12, 12, 10, false}, // over the limit already: unchanged is fine
		{12, 11, 10, false}, // and shrinking too
		{12, 13, 10, true},
	} {
		err := CheckRuleLimit("lb", tc.before, tc.after, tc.max)
		if (err != nil) != tc.wantErr {
			t.Errorf("%d -> %d (max %d): %v", tc.before, tc.after, tc.max, err)
		}
		if err != nil && err.Error() != "load balancer lb would have "+itoa(int32(tc.after))+" load balancing rules, more than Azure's limit of "+itoa(int32(tc.max))+" per Standard load balancer" {
			t.Errorf("message %q", err)
		}
	}
}

func TestCheckRoom(t *testing.T) {
	rules := func(names ...string) *armnetwork.LoadBalancer {
		lb := &armnetwork.LoadBalancer{Properties: &armnetwork.LoadBalancerPropertiesFormat{}}
		for _, n := range names {
			lb.Properties.LoadBalancingRules = append(lb.Properties.LoadBalancingRules, &armnetwork.LoadBalancingRule{Name: to.Ptr(n)})
		}
		return lb
	}
	other, own := "bbbbbbbbb-TCP-80", svcA+"-TCP-80"
	for _, tc := range []struct {
		name          string
		lb            *armnetwork.LoadBalancer
		pending, need int
		grow          int
		wantErr       string
	}{
		{name: "no load balancer yet", lb: nil, need: 3, grow: 3},
		{name: "exactly full fits", lb: rules(other, other), need: 3, grow: 3},
		{name: "one over", lb: rules(other, other, other), need: 3,
			wantErr: "load balancer lb would have 6 load balancing rules, more than Azure's limit of 5 per Standard load balancer"},
		{name: "pending rules of others count", lb: rules(other), pending: 2, need: 3,
			wantErr: "load balancer lb would have 6 load balancing rules"},
		{name: "the service's own rules are replaced", lb: rules(other, other, own), need: 3, grow: 2},
		{name: "a service that does not grow passes on a full load balancer", lb: rules(other, other, other, other, own), pending: 4, need: 1},
		{name: "a service that shrinks passes", lb: rules(other, other, other, own, own), pending: 4, need: 1},
		{name: "growth on a full load balancer is refused", lb: rules(other, other, other, other, own), need: 2,
			wantErr: "would have 6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			grow, err := CheckRoom("lb", tc.lb, svcA, tc.pending, tc.need, 5)
			if tc.wantErr != "" {
				var rle *RuleLimitError
				if !errors.As(err, &rle) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || grow != tc.grow {
				t.Fatalf("grow %d, error %v; want %d", grow, err, tc.grow)
			}
		})
	}
}
