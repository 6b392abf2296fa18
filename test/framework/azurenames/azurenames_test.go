package azurenames

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// Every expectation is a full literal: the names the existing provider gives a service whose
// UID is 1b2c3d4e-5f60-4718-8a9b-0c1d2e3f4a5b (its LB name drops the UID's last character).
// The NSG hashes are md5 sums computed outside Go (md5sum of the key shown next to each).
const (
	uid   = "1b2c3d4e-5f60-4718-8a9b-0c1d2e3f4a5b"
	svcLB = "a1b2c3d4e5f6047188a9b0c1d2e3f4a5"
)

func TestServiceAndLoadBalancerNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{ServiceLBName(uid), "a1b2c3d4e5f6047188a9b0c1d2e3f4a5"},
		{ServiceLBName("abc-def"), "aabcdef"},
		{LoadBalancerName("kubernetes", false), "kubernetes"},
		{LoadBalancerName("kubernetes", true), "kubernetes-internal"},
		{BackendPoolName("kubernetes", IPv4), "kubernetes"},
		{BackendPoolName("kubernetes", IPv6), "kubernetes-IPv6"},
		{LocalServicePoolName("Team-A", "Web", IPv4), "team-a-web"},
		{LocalServicePoolName("Team-A", "Web", IPv6), "team-a-web-ipv6"},
		{PrivateLinkName(svcLB), "pls-a1b2c3d4e5f6047188a9b0c1d2e3f4a5"},
		{RouteName("node-1", "10.244.0.0/24"), "node-1____102440024"},
		{GatewayIdentity("1B2C3D4E-5F60-4718-8A9B-0C1D2E3F4A5B"), "1b2c3d4e-5f60-4718-8a9b-0c1d2e3f4a5b"},
		{GatewayPublicIPName("1b2c3d4e-5f60-4718-8a9b-0c1d2e3f4a5b"), "1b2c3d4e-5f60-4718-8a9b-0c1d2e3f4a5b-pip"},
		{GatewayPublicIPName("egress1"), "egress1-pip"},
		{ServiceGatewayName, "servicegateway"},
		{GatewayLBSKU, "Service"},
		{RouteName("node-1", "fd00:10:244::/64"), "node-1____fd001024464"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestFrontendNames(t *testing.T) {
	for _, c := range []struct {
		subnet string
		dual   bool
		f      Family
		want   string
	}{
		{"", false, IPv4, "a1b2c3d4e5f6047188a9b0c1d2e3f4a5"},
		{"", false, IPv6, "a1b2c3d4e5f6047188a9b0c1d2e3f4a5"},
		{"", true, IPv4, "a1b2c3d4e5f6047188a9b0c1d2e3f4a5"},
		{"", true, IPv6, "a1b2c3d4e5f6047188a9b0c1d2e3f4a5-IPv6"},
		{"ilb", false, IPv4, "a1b2c3d4e5f6047188a9b0c1d2e3f4a5-ilb"},
		{"ilb", true, IPv6, "a1b2c3d4e5f6047188a9b0c1d2e3f4a5-ilb-IPv6"},
		// 83 characters cut to 75, ending in a letter.
		{"aks-internal-load-balancer-subnet-westeurope-zone1", false, IPv4,
			"a1b2c3d4e5f6047188a9b0c1d2e3f4a5-aks-internal-load-balancer-subnet-westeuro"},
		// 79 characters cut to 75, ending in a digit: that becomes '_'.
		{"aks-internal-load-balancer-subnet-0123456789-x", true, IPv6,
			"a1b2c3d4e5f6047188a9b0c1d2e3f4a5-aks-internal-load-balancer-subnet-0123456_-IPv6"},
	} {
		if got := FrontendName(svcLB, c.subnet, c.dual, c.f); got != c.want {
			t.Errorf("FrontendName(%q, %t, %s) = %q, want %q", c.subnet, c.dual, c.f, got, c.want)
		}
	}
}

func TestRuleAndProbeNames(t *testing.T) {
	for _, c := range []struct {
		subnet string
		proto  corev1.Protocol
		port   int32
		dual   bool
		f      Family
		want   string
	}{
		{"", corev1.ProtocolTCP, 80, false, IPv4, "a1b2c3d4e5f6047188a9b0c1d2e3f4a5-TCP-80"},
		{"", corev1.ProtocolUDP, 53, false, IPv4, "a1b2c3d4e5f6047188a9b0c1d2e3f4a5-UDP-53"},
		{"", corev1.ProtocolSCTP, 9, false, IPv4, "a1b2c3d4e5f6047188a9b0c1d2e3f4a5-SCTP-9"},
		{"", corev1.ProtocolTCP, 443, false, IPv6, "a1b2c3d4e5f6047188a9b0c1d2e3f4a5-TCP-443"},
		{"", corev1.ProtocolTCP, 443, true, IPv4, "a1b2c3d4e5f6047188a9b0c1d2e3f4a5-TCP-443"},
		{"", corev1.ProtocolTCP, 443, true, IPv6, "a1b2c3d4e5f6047188a9b0c1d2e3f4a5-TCP-443-IPv6"},
		{"ilb", corev1.ProtocolTCP, 80, false, IPv4, "a1b2c3d4e5f6047188a9b0c1d2e3f4a5-ilb-TCP-80"},
		// The subnet keeps 35 characters, so the name is 75 (80 with -IPv6).
		{"aks-internal-load-balancer-subnet-westeurope-zone1", corev1.ProtocolTCP, 80, false, IPv4,
			"a1b2c3d4e5f6047188a9b0c1d2e3f4a5-aks-internal-load-balancer-subnet-w-TCP-80"},
		{"aks-internal-load-balancer-subnet-westeurope-zone1", corev1.ProtocolTCP, 80, true, IPv6,
			"a1b2c3d4e5f6047188a9b0c1d2e3f4a5-aks-internal-load-balancer-subnet-w-TCP-80-IPv6"},
	} {
		if got := RuleName(svcLB, c.subnet, c.proto, c.port, c.dual, c.f); got != c.want {
			t.Errorf("RuleName(%q, %s, %d, %t, %s) = %q, want %q", c.subnet, c.proto, c.port, c.dual, c.f, got, c.want)
		}
	}
	ports := []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80}, {Protocol: corev1.ProtocolTCP, Port: 443}}
	if got := HAPortsRuleName(svcLB, "", ports, false, IPv4); got != "a1b2c3d4e5f6047188a9b0c1d2e3f4a5-TCP-80" {
		t.Errorf("HA ports rule %q", got)
	}
	if got := LocalProbeName(svcLB, 31234, false, IPv4); got != "a1b2c3d4e5f6047188a9b0c1d2e3f4a5-TCP-31234" {
		t.Errorf("local probe %q", got)
	}
}

func TestPublicIPNames(t *testing.T) {
	prefix := "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Network/publicIPPrefixes/prefix1"
	sixty := "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
	for _, c := range []struct {
		cluster, prefix string
		dual            bool
		f               Family
		want            string
	}{
		{"kubernetes", "", false, IPv4, "kubernetes-a1b2c3d4e5f6047188a9b0c1d2e3f4a5"},
		{"kubernetes", "", false, IPv6, "kubernetes-a1b2c3d4e5f6047188a9b0c1d2e3f4a5"},
		{"kubernetes", "", true, IPv6, "kubernetes-a1b2c3d4e5f6047188a9b0c1d2e3f4a5-IPv6"},
		{"kubernetes", prefix, false, IPv4, "kubernetes-a1b2c3d4e5f6047188a9b0c1d2e3f4a5-prefix1"},
		// 93 characters cut to 75 before the suffix.
		{sixty, "", true, IPv6, "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc-a1b2c3d4e5f604-IPv6"},
	} {
		if got := PublicIPName(c.cluster, svcLB, c.prefix, c.dual, c.f); got != c.want {
			t.Errorf("PublicIPName(%q, %q, %t, %s) = %q, want %q", c.cluster, c.prefix, c.dual, c.f, got, c.want)
		}
	}
}

func TestSecurityRuleNames(t *testing.T) {
	sources := []string{"192.168.0.0/16", "10.0.0.0/8"}
	for _, c := range []struct{ got, want string }{
		// md5("Tcp_Internet_80")
		{AllowRuleName("Tcp", IPv4, []string{"Internet"}, []int32{80}), "k8s-azure-lb_allow_IPv4_d39272f7f57ed937951650d93992ad77"},
		// md5("Tcp_Internet_443,80"): ports sort as strings.
		{AllowRuleName("Tcp", IPv4, []string{"Internet"}, []int32{80, 443}), "k8s-azure-lb_allow_IPv4_556f7044ec033071ec0dfcf7cd85bc93"},
		// md5("Udp_10.0.0.0/8,192.168.0.0/16_53"): sources sorted.
		{AllowRuleName("Udp", IPv6, sources, []int32{53}), "k8s-azure-lb_allow_IPv6_545ea50c50ef8635dcabbb5c0e93cbed"},
		// md5("Tcp_2001:db8:1::/48_80")
		{AllowRuleName("Tcp", IPv6, []string{"2001:db8:1::/48"}, []int32{80}), "k8s-azure-lb_allow_IPv6_8e08a061c7af1f51e9686c70e6f4595c"},
		{DenyAllRuleName(IPv4), "k8s-azure-lb_deny-all_IPv4"},
		{DenyAllRuleName(IPv6), "k8s-azure-lb_deny-all_IPv6"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	if !slices.Equal(sources, []string{"192.168.0.0/16", "10.0.0.0/8"}) {
		t.Errorf("AllowRuleName reordered its argument: %v", sources)
	}
	for _, c := range []struct {
		name     string
		priority int32
		want     bool
	}{
		{"k8s-azure-lb_allow_IPv4_d39272f7f57ed937951650d93992ad77", 500, true},
		{"k8s-azure-lb_deny-all_IPv4", 4095, true},
		{"k8s-azure-lb_allow_IPv4_d39272f7f57ed937951650d93992ad77", 499, false},
		{"k8s-azure-lb_allow_IPv4_d39272f7f57ed937951650d93992ad77", 4097, false},
		{"allow-office", 600, false},
	} {
		if got := IsManagedSecurityRule(c.name, c.priority); got != c.want {
			t.Errorf("IsManagedSecurityRule(%q, %d) = %t", c.name, c.priority, got)
		}
	}
}

func TestOwnership(t *testing.T) {
	for _, c := range []struct {
		name string
		want bool
	}{
		{"a1b2c3d4e5f6047188a9b0c1d2e3f4a5-TCP-80", true},
		{"A1B2C3D4E5F6047188A9B0C1D2E3F4A5-IPv6", true},
		{"a1b2c3d4e5f6047188a9b0c1d2e3f4a6-TCP-80", false},
		{"pls-a1b2c3d4e5f6047188a9b0c1d2e3f4a5", false},
	} {
		if got := OwnedByService(svcLB, c.name); got != c.want {
			t.Errorf("OwnedByService(%q) = %t", c.name, got)
		}
	}
}

func TestTags(t *testing.T) {
	if got := ServiceKey("default", "web"); got != "default/web" {
		t.Errorf("ServiceKey %q", got)
	}
	if got := ParseServiceTag(" default/web, ns2/api ,,"); !slices.Equal(got, []string{"default/web", "ns2/api"}) {
		t.Errorf("ParseServiceTag %q", got)
	}
	if got := ParseServiceTag(""); got != nil {
		t.Errorf("ParseServiceTag of empty %q", got)
	}
	v := func(s string) *string { return &s }
	tags := map[string]*string{"k8s-azure-service": v("default/web"), "K8S-Azure-Cluster-Name": v("kubernetes"),
		"k8s-azure-dns-label-service": v("default/dns"), "service": v("legacy/key"), "k8s-azure-owner-service": v("default/pls")}
	for _, c := range []struct {
		got  func() (string, bool)
		want string
	}{
		{func() (string, bool) { return ServiceTagValue(tags) }, "default/web"},
		{func() (string, bool) { return ClusterTagValue(tags) }, "kubernetes"},
		{func() (string, bool) { return DNSLabelServiceTagValue(tags) }, "default/dns"},
		{func() (string, bool) { return TagValue(tags, "k8s-azure-owner-service") }, "default/pls"},
	} {
		if got, ok := c.got(); !ok || got != c.want {
			t.Errorf("got %q (%t), want %q", got, ok, c.want)
		}
	}
	if got, ok := ServiceTagValue(map[string]*string{"service": v("legacy/key")}); ok {
		t.Errorf("the legacy key is not what the provider writes, read %q", got)
	}
	if TagService != "k8s-azure-service" || TagClusterName != "k8s-azure-cluster-name" ||
		TagDNSLabelService != "k8s-azure-dns-label-service" || TagPLSOwner != "k8s-azure-owner-service" {
		t.Error("tag keys")
	}
}
