package plan

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
)

func withStatus(ips ...string) svcOpt {
	return func(s *v1.Service) {
		for _, ip := range ips {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: ip})
		}
	}
}

func TestSecurityDestinations(t *testing.T) {
	nodeAddrs := addrs("10.0.0.4", "fd00::4")
	for _, tc := range []struct {
		name string
		opts []svcOpt
		ips  []netip.Addr
		want bool
		out  string
	}{
		{"frontend addresses", nil, addrs("203.0.113.1"), true, "[203.0.113.1]"},
		{"additional public IPs while wanted", []svcOpt{withAnn(annotations.AdditionalPublicIPs, "198.51.100.7")}, addrs("203.0.113.1"), true,
			"[203.0.113.1 198.51.100.7]"},
		{"additional public IPs not on cleanup", []svcOpt{withAnn(annotations.AdditionalPublicIPs, "198.51.100.7")}, addrs("203.0.113.1"), false,
			"[203.0.113.1]"},
		{"floating IP disabled: the nodes", []svcOpt{withAnn(annotations.DisableFloatingIP, "true")}, addrs("203.0.113.1"), true,
			"[10.0.0.4 fd00::4]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mkService(t, uidA, "a", tc.opts...)
			if got := fmt.Sprint(SecurityDestinations(s, tc.ips, tc.want, nodeAddrs)); got != tc.out {
				t.Errorf("%s, want %s", got, tc.out)
			}
		})
	}
}

func TestStaleDestinations(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status []string
		dsts   []netip.Addr
		former []netip.Addr
		held   map[netip.Addr]bool
		out    string
	}{
		{"status matches", []string{"10.1.0.5"}, addrs("10.1.0.5"), nil, nil, "[]"},
		{"an old status address", []string{"10.1.0.5", "10.1.0.9"}, addrs("10.1.0.5"), nil, nil, "[10.1.0.9]"},
		{"an old address someone else holds now", []string{"10.1.0.9"}, addrs("10.1.0.5"), nil, map[netip.Addr]bool{netip.MustParseAddr("10.1.0.9"): true}, "[]"},
		{"a hostname in the status is ignored", []string{"not-an-ip"}, nil, nil, nil, "[]"},
		{"a released public IP's address the status never showed", []string{"203.0.113.1"}, addrs("203.0.113.1"), addrs("203.0.113.2"), nil, "[203.0.113.2]"},
		{"a released public IP still the destination", []string{"203.0.113.1"}, addrs("203.0.113.1"), addrs("203.0.113.1"), nil, "[]"},
		{"a released address in the status too, once", []string{"203.0.113.1", "203.0.113.2"}, addrs("203.0.113.1"), addrs("203.0.113.2"), nil, "[203.0.113.2]"},
		{"a released shared public IP another service holds", nil, addrs("203.0.113.1"), addrs("203.0.113.3"), map[netip.Addr]bool{netip.MustParseAddr("203.0.113.3"): true}, "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mkService(t, uidA, "a", withStatus(tc.status...))
			if got := fmt.Sprint(StaleDestinations(s, tc.dsts, tc.former, tc.held)); got != tc.out {
				t.Errorf("%s, want %s", got, tc.out)
			}
		})
	}
}

func TestAddressesHeld(t *testing.T) {
	s := mkService(t, uidA, "a")
	other := mkService(t, uidB, "b", withStatus("203.0.113.2"))
	self := mkService(t, uidA, "a", withStatus("203.0.113.1"))
	lb := &armnetwork.LoadBalancer{Properties: &armnetwork.LoadBalancerPropertiesFormat{FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{
		{Name: to.Ptr(svcA), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{PrivateIPAddress: to.Ptr("10.1.0.4")}},
		{Name: to.Ptr(svcB), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{PrivateIPAddress: to.Ptr("10.1.0.5")}},
		{Name: to.Ptr("users-own"), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{PrivateIPAddress: to.Ptr("10.1.0.6")}},
	}}}
	held := AddressesHeld(s, []*armnetwork.LoadBalancer{nil, lb}, []*v1.Service{other.Svc, self.Svc})
	for a, want := range map[string]bool{"10.1.0.4": false, "10.1.0.5": true, "10.1.0.6": true, "203.0.113.2": true, "203.0.113.1": false} {
		if held[netip.MustParseAddr(a)] != want {
			t.Errorf("%s held %v, want %v", a, held[netip.MustParseAddr(a)], want)
		}
	}
}

func TestRetainedPorts(t *testing.T) {
	s := mkService(t, uidA, "a", withPorts(tcp(80, 30080)))
	shared := mkService(t, uidB, "shared", withPorts(tcp(443, 30443), udp(53, 30053)), withStatus("203.0.113.1"))
	elsewhere := mkService(t, "cccccccc-1111-2222-3333-444444444444", "elsewhere", withPorts(tcp(8080, 31080)), withStatus("203.0.113.9"))
	deleting := mkService(t, "dddddddd-1111-2222-3333-444444444444", "deleting", withPorts(tcp(22, 30022)), withStatus("203.0.113.1"))
	deleting.Svc.DeletionTimestamp = &metavNow
	otherClass := mkService(t, "eeeeeeee-1111-2222-3333-444444444444", "other-class", withPorts(tcp(25, 30025)), withStatus("203.0.113.1"))
	otherClass.Svc.Spec.LoadBalancerClass = to.Ptr("example.com/other")
	nfA := mkService(t, uidA, "a", withAnn(annotations.DisableFloatingIP, "true"))
	nfB := mkService(t, uidB, "nf", withAnn(annotations.DisableFloatingIP, "true"), withPorts(tcp(9000, 32000)))
	for _, tc := range []struct {
		name   string
		s      *Service
		dsts   []netip.Addr
		others []*v1.Service
		out    string
	}{
		{"another service on the same IP keeps its ports", s, addrs("203.0.113.1"),
			[]*v1.Service{shared.Svc, elsewhere.Svc}, "map[Tcp:[443] Udp:[53]]"},
		{"deleting and other-class services keep nothing", s, addrs("203.0.113.1"), []*v1.Service{deleting.Svc, otherClass.Svc}, "map[]"},
		{"services without floating IP share the node addresses", nfA, addrs("10.0.0.4"), []*v1.Service{nfB.Svc, shared.Svc}, "map[Tcp:[32000]]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fmt.Sprint(RetainedPorts(tc.s, tc.dsts, tc.others)); got != tc.out {
				t.Errorf("%s, want %s", got, tc.out)
			}
		})
	}
}
