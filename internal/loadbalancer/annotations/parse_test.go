package annotations

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func svcWith(ann map[string]string) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Annotations: ann},
		Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeLoadBalancer,
			Ports: []v1.ServicePort{
				{Name: "http", Port: 80, NodePort: 30080, Protocol: v1.ProtocolTCP},
				{Name: "dns", Port: 53, NodePort: 30053, Protocol: v1.ProtocolUDP},
			},
		},
	}
}

func ptr[T any](v T) *T { return &v }

func TestParseValid(t *testing.T) {
	const prefixID = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg/providers/Microsoft.Network/publicIPPrefixes/pfx"
	const sub = "00000000-0000-0000-0000-000000000002"
	tests := []struct {
		name  string
		ann   map[string]string
		mod   func(*v1.Service)
		check func(t *testing.T, o *ServiceOptions)
	}{
		{"defaults", nil, nil, func(t *testing.T, o *ServiceOptions) {
			if o.Internal || o.IdleTimeoutMinutes != 4 || o.ProbeInterval(nil) != 5 || o.ProbeThreshold(nil) != 2 ||
				o.PLS.IPAddressCount != 1 || o.DNSLabelName != nil || o.HAPorts || o.DisableFloatingIP {
				t.Fatalf("unexpected defaults %+v", o)
			}
		}},
		{"internal TRUE case-insensitive", map[string]string{Internal: "TRUE"}, nil, func(t *testing.T, o *ServiceOptions) {
			if !o.Internal {
				t.Fatal("want internal")
			}
		}},
		{"internal false", map[string]string{Internal: "false"}, nil, func(t *testing.T, o *ServiceOptions) {
			if o.Internal {
				t.Fatal("want public")
			}
		}},
		{"internal subnet", map[string]string{Internal: "true", InternalSubnet: " subnet-a "}, nil, func(t *testing.T, o *ServiceOptions) {
			if o.InternalSubnet != "subnet-a" {
				t.Fatalf("subnet %q", o.InternalSubnet)
			}
		}},
		{"subnet ignored on public service", map[string]string{InternalSubnet: "subnet-a"}, nil, func(t *testing.T, o *ServiceOptions) {
			if o.InternalSubnet != "" {
				t.Fatalf("subnet %q", o.InternalSubnet)
			}
		}},
		{"ipv4 and ipv6", map[string]string{IPv4: "203.0.113.7", IPv6: "2001:db8::7"}, nil, func(t *testing.T, o *ServiceOptions) {
			if o.IPv4 != netip.MustParseAddr("203.0.113.7") || o.IPv6 != netip.MustParseAddr("2001:db8::7") {
				t.Fatalf("ips %v %v", o.IPv4, o.IPv6)
			}
		}},
		{"spec.loadBalancerIP fallback", nil, func(s *v1.Service) { s.Spec.LoadBalancerIP = "203.0.113.9" }, func(t *testing.T, o *ServiceOptions) {
			if o.IPv4 != netip.MustParseAddr("203.0.113.9") {
				t.Fatalf("ip %v", o.IPv4)
			}
		}},
		{"annotation wins over spec.loadBalancerIP", map[string]string{IPv4: "203.0.113.1"}, func(s *v1.Service) { s.Spec.LoadBalancerIP = "203.0.113.9" }, func(t *testing.T, o *ServiceOptions) {
			if o.IPv4 != netip.MustParseAddr("203.0.113.1") {
				t.Fatalf("ip %v", o.IPv4)
			}
		}},
		{"pip names", map[string]string{PIPName: "my-pip", PIPNameIPv6: "my-pip6"}, nil, func(t *testing.T, o *ServiceOptions) {
			if o.PIPNameIPv4 != "my-pip" || o.PIPNameIPv6 != "my-pip6" {
				t.Fatalf("%q %q", o.PIPNameIPv4, o.PIPNameIPv6)
			}
		}},
		{"pip prefixes", map[string]string{PIPPrefixID: prefixID, PIPPrefixIDIPv6: prefixID + "6"}, nil, func(t *testing.T, o *ServiceOptions) {
			if o.PIPPrefixIDIPv4 != prefixID || o.PIPPrefixIDIPv6 != prefixID+"6" {
				t.Fatalf("%q %q", o.PIPPrefixIDIPv4, o.PIPPrefixIDIPv6)
			}
		}},
		{"pip resource group", map[string]string{ResourceGroup: "other-rg"}, nil, func(t *testing.T, o *ServiceOptions) {
			if o.PIPResourceGroup != "other-rg" {
				t.Fatal(o.PIPResourceGroup)
			}
		}},
		{"dns label", map[string]string{DNSLabelName: "myapp-1"}, nil, func(t *testing.T, o *ServiceOptions) {
			if o.DNSLabelName == nil || *o.DNSLabelName != "myapp-1" {
				t.Fatal("dns label")
			}
		}},
		{"empty dns label removes", map[string]string{DNSLabelName: ""}, nil, func(t *testing.T, o *ServiceOptions) {
			if o.DNSLabelName == nil || *o.DNSLabelName != "" {
				t.Fatal("want empty, non-nil label")
			}
		}},
		{"pip tags", map[string]string{PIPTags: "a=b, c = d ,e="}, nil, func(t *testing.T, o *ServiceOptions) {
			if !reflect.DeepEqual(o.PIPTags, map[string]string{"a": "b", "c": "d", "e": ""}) {
				t.Fatal(o.PIPTags)
			}
		}},
		{"ip tags", map[string]string{PIPIPTags: "RoutingPreference=Internet,FirstPartyUsage=/Unprivileged"}, nil, func(t *testing.T, o *ServiceOptions) {
			want := []IPTag{{"RoutingPreference", "Internet"}, {"FirstPartyUsage", "/Unprivileged"}}
			if !reflect.DeepEqual(o.PIPIPTags, want) {
				t.Fatal(o.PIPIPTags)
			}
		}},
		{"additional public ips", map[string]string{AdditionalPublicIPs: "198.51.100.1, 2001:db8::1"}, nil, func(t *testing.T, o *ServiceOptions) {
			if len(o.AdditionalPublicIPs) != 2 || !o.AdditionalPublicIPs[1].Is6() {
				t.Fatal(o.AdditionalPublicIPs)
			}
		}},
		{"mode kept", map[string]string{Mode: "__auto__"}, nil, func(t *testing.T, o *ServiceOptions) {
			if o.Mode != ModeAuto {
				t.Fatal(o.Mode)
			}
		}},
		{"configurations lower-cased", map[string]string{LoadBalancerConfigs: "LB1, lb2"}, nil, func(t *testing.T, o *ServiceOptions) {
			if !reflect.DeepEqual(o.Configurations, []string{"lb1", "lb2"}) {
				t.Fatal(o.Configurations)
			}
		}},
		{"configurations with a requested IP: placement decides", map[string]string{LoadBalancerConfigs: "lb1", IPv4: "203.0.113.1"}, nil, func(t *testing.T, o *ServiceOptions) {
			if !reflect.DeepEqual(o.Configurations, []string{"lb1"}) || o.IPv4.String() != "203.0.113.1" {
				t.Fatal(o.Configurations, o.IPv4)
			}
		}},
		{"internal service with a private address", map[string]string{Internal: "true"}, func(s *v1.Service) { s.Spec.LoadBalancerIP = "10.240.0.9" }, func(t *testing.T, o *ServiceOptions) {
			if o.IPv4.String() != "10.240.0.9" {
				t.Fatal(o.IPv4)
			}
		}},
		{"public service with a public address of a documentation range", map[string]string{IPv6: "2001:db8::9"}, func(s *v1.Service) { s.Spec.LoadBalancerIP = "198.51.100.9" }, func(t *testing.T, o *ServiceOptions) {
			if o.IPv4.String() != "198.51.100.9" || o.IPv6.String() != "2001:db8::9" {
				t.Fatal(o.IPv4, o.IPv6)
			}
		}},
		{"idle timeout", map[string]string{TCPIdleTimeout: "100"}, nil, func(t *testing.T, o *ServiceOptions) {
			if o.IdleTimeoutMinutes != 100 {
				t.Fatal(o.IdleTimeoutMinutes)
			}
		}},
		{"rule flags", map[string]string{DisableTCPReset: "true", DisableFloatingIP: "True"}, nil, func(t *testing.T, o *ServiceOptions) {
			if !o.DisableTCPReset || !o.DisableFloatingIP {
				t.Fatal("flags")
			}
		}},
		{"ha ports on internal", map[string]string{Internal: "true", HAPorts: "true"}, nil, func(t *testing.T, o *ServiceOptions) {
			if !o.HAPorts {
				t.Fatal("ha")
			}
		}},
		{"ha ports ignored on public", map[string]string{HAPorts: "true"}, nil, func(t *testing.T, o *ServiceOptions) {
			if o.HAPorts {
				t.Fatal("ha on public")
			}
		}},
		{"global probe", map[string]string{ProbeProtocol: "http", ProbeRequestPath: "/ready", ProbeInterval: "10", ProbeNumOfProbe: "3"}, nil, func(t *testing.T, o *ServiceOptions) {
			if o.Probe.Protocol != ProbeHTTP || *o.Probe.RequestPath != "/ready" || o.ProbeInterval(nil) != 10 || o.ProbeThreshold(nil) != 3 {
				t.Fatalf("%+v", o.Probe)
			}
		}},
		{"per-port probe", map[string]string{
			PortProbeKey(80, PortProbeProtocol): "HTTPS", PortProbeKey(80, PortProbeRequestPath): "/p",
			PortProbeKey(80, PortProbeInterval): "7", PortProbeKey(80, PortProbeNumOfProbe): "4", PortProbeKey(80, PortProbePort): "dns",
			ProbeInterval: "6",
		}, nil, func(t *testing.T, o *ServiceOptions) {
			p := o.Port(80).Probe
			if p.Protocol != ProbeHTTPS || *p.RequestPath != "/p" || p.Port != "dns" {
				t.Fatalf("%+v", p)
			}
			if o.ProbeInterval(ptr(int32(80))) != 7 || o.ProbeThreshold(ptr(int32(80))) != 4 || o.ProbeInterval(ptr(int32(53))) != 6 {
				t.Fatal("per-port resolution")
			}
		}},
		{"per-port probe port by number", map[string]string{PortProbeKey(80, PortProbePort): "53"}, nil, func(t *testing.T, o *ServiceOptions) {
			if o.Port(80).Probe.Port != "53" {
				t.Fatal(o.Port(80))
			}
		}},
		{"no lb rule / no probe rule", map[string]string{PortNoLBRuleKey(53): "true", PortNoProbeRuleKey(80): "true"}, nil, func(t *testing.T, o *ServiceOptions) {
			if !o.Port(53).NoLBRule || !o.Port(80).NoProbeRule || o.Port(80).NoLBRule {
				t.Fatal(o.Ports)
			}
		}},
		{"annotation on unknown port ignored", map[string]string{PortNoLBRuleKey(9999): "garbage"}, nil, func(t *testing.T, o *ServiceOptions) {
			if _, ok := o.Ports[9999]; ok {
				t.Fatal("unknown port parsed")
			}
		}},
		{"spec source ranges masked", nil, func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.1/8", " 2001:db8::/32"} }, func(t *testing.T, o *ServiceOptions) {
			want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32")}
			if !reflect.DeepEqual(o.SourceRanges, want) {
				t.Fatal(o.SourceRanges)
			}
		}},
		{"core source ranges annotation", map[string]string{CoreLBSourceRanges: "192.168.0.0/16,1.2.3.4"}, nil, func(t *testing.T, o *ServiceOptions) {
			want := []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("1.2.3.4/32")}
			if !reflect.DeepEqual(o.SourceRanges, want) {
				t.Fatal(o.SourceRanges)
			}
		}},
		{"spec ranges win over core annotation", map[string]string{CoreLBSourceRanges: "192.168.0.0/16"}, func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8"} }, func(t *testing.T, o *ServiceOptions) {
			if len(o.SourceRanges) != 1 || o.SourceRanges[0].String() != "10.0.0.0/8" {
				t.Fatal(o.SourceRanges)
			}
		}},
		{"allowed ip ranges and tags", map[string]string{AllowedIPRanges: "10.0.0.0/8", AllowedServiceTags: "AzureCloud.WestUS, Storage"}, nil, func(t *testing.T, o *ServiceOptions) {
			if len(o.AllowedIPRanges) != 1 || !reflect.DeepEqual(o.AllowedServiceTags, []string{"AzureCloud.WestUS", "Storage"}) {
				t.Fatalf("%v %v", o.AllowedIPRanges, o.AllowedServiceTags)
			}
		}},
		{"nsg flags", map[string]string{DenyAllExceptLBSources: "true", DisableNSGRule: "true"}, nil, func(t *testing.T, o *ServiceOptions) {
			if !o.DenyAllExceptSourceRanges || !o.DisableNSGRule {
				t.Fatal("nsg flags")
			}
		}},
		{"pls", map[string]string{Internal: "true", PLSCreate: "true", PLSName: "my-pls", PLSResourceGroup: "pls-rg", PLSSubnet: "pls-subnet",
			PLSIPAddressCount: "2", PLSIPAddresses: "10.0.0.4 10.0.0.5", PLSFQDNs: "a.example.com b.example.com", PLSProxyProtocol: "true",
			PLSVisibility: "*", PLSAutoApproval: sub}, nil, func(t *testing.T, o *ServiceOptions) {
			p := o.PLS
			if !p.Create || p.Name != "my-pls" || p.ResourceGroup != "pls-rg" || p.Subnet != "pls-subnet" || p.IPAddressCount != 2 ||
				len(p.IPAddresses) != 2 || len(p.FQDNs) != 2 || !p.ProxyProtocol || !reflect.DeepEqual(p.Visibility, []string{"*"}) ||
				!reflect.DeepEqual(p.AutoApproval, []string{sub}) {
				t.Fatalf("%+v", p)
			}
		}},
		{"pls on a public service without floating IP", map[string]string{PLSCreate: "true", DisableFloatingIP: "true"}, nil, func(t *testing.T, o *ServiceOptions) {
			if !o.PLS.Create || o.Internal || !o.DisableFloatingIP {
				t.Fatalf("%+v", o.PLS)
			}
		}},
		{"pls on a dual-stack internal service", map[string]string{Internal: "true", PLSCreate: "true"}, func(s *v1.Service) {
			s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}
		}, func(t *testing.T, o *ServiceOptions) {
			if !o.PLS.Create {
				t.Fatal("not created")
			}
		}},
		{"pls visibility subscriptions", map[string]string{PLSVisibility: sub + " " + sub}, nil, func(t *testing.T, o *ServiceOptions) {
			if len(o.PLS.Visibility) != 2 {
				t.Fatal(o.PLS.Visibility)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := svcWith(tc.ann)
			if tc.mod != nil {
				tc.mod(s)
			}
			o, err := Parse(s)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			tc.check(t, o)
		})
	}
}

func TestParseInvalid(t *testing.T) {
	tests := []struct {
		name    string
		ann     map[string]string
		mod     func(*v1.Service)
		wantKey string
		wantVal string
	}{
		{"internal not bool", map[string]string{Internal: "yes"}, nil, Internal, "yes"},
		{"subnet bad name", map[string]string{Internal: "true", InternalSubnet: "bad/subnet"}, nil, InternalSubnet, "bad/subnet"},
		{"ipv4 not ip", map[string]string{IPv4: "1.2.3"}, nil, IPv4, "1.2.3"},
		{"ipv4 is v6", map[string]string{IPv4: "2001:db8::1"}, nil, IPv4, "2001:db8::1"},
		{"ipv6 is v4", map[string]string{IPv6: "203.0.113.1"}, nil, IPv6, "203.0.113.1"},
		{"spec lb ip invalid", nil, func(s *v1.Service) { s.Spec.LoadBalancerIP = "nope" }, "spec.loadBalancerIP", "nope"},
		{"pip name bad", map[string]string{PIPName: "-bad"}, nil, PIPName, "-bad"},
		{"pip name ipv6 bad", map[string]string{PIPNameIPv6: "bad name"}, nil, PIPNameIPv6, "bad name"},
		{"prefix id not an id", map[string]string{PIPPrefixID: "pfx"}, nil, PIPPrefixID, "pfx"},
		{"prefix id wrong type", map[string]string{PIPPrefixIDIPv6: "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/publicIPAddresses/x"}, nil, PIPPrefixIDIPv6, "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/publicIPAddresses/x"},
		{"prefix with pip name", map[string]string{PIPName: "p", PIPPrefixID: "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/publicIPPrefixes/x"}, nil, PIPPrefixID, "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/publicIPPrefixes/x"},
		{"resource group bad", map[string]string{ResourceGroup: "rg."}, nil, ResourceGroup, "rg."},
		{"dns label upper", map[string]string{DNSLabelName: "MyApp"}, nil, DNSLabelName, "MyApp"},
		{"dns label too short", map[string]string{DNSLabelName: "ab"}, nil, DNSLabelName, "ab"},
		{"ip tags no tag", map[string]string{PIPIPTags: "RoutingPreference="}, nil, PIPIPTags, "RoutingPreference="},
		{"additional ip bad", map[string]string{AdditionalPublicIPs: "1.2.3.4,x"}, nil, AdditionalPublicIPs, "x"},
		{"public service, private spec address", nil, func(s *v1.Service) { s.Spec.LoadBalancerIP = "10.0.0.5" }, "spec.loadBalancerIP", "10.0.0.5"},
		{"public service, private ipv4 annotation", map[string]string{IPv4: "192.168.1.1"}, nil, IPv4, "192.168.1.1"},
		{"public service, shared address space", map[string]string{IPv4: "100.64.0.1"}, nil, IPv4, "100.64.0.1"},
		{"public service, wire server", map[string]string{IPv4: "168.63.129.16"}, nil, IPv4, "168.63.129.16"},
		{"public service, multicast", map[string]string{IPv4: "224.0.0.1"}, nil, IPv4, "224.0.0.1"},
		{"public service, unique local ipv6", map[string]string{IPv6: "fd00::1"}, nil, IPv6, "fd00::1"},
		{"public service, link-local ipv6 by spec", nil, func(s *v1.Service) { s.Spec.LoadBalancerIP = "fe80::1" }, "spec.loadBalancerIP", "fe80::1"},
		{"idle timeout low", map[string]string{TCPIdleTimeout: "3"}, nil, TCPIdleTimeout, "3"},
		{"idle timeout high", map[string]string{TCPIdleTimeout: "101"}, nil, TCPIdleTimeout, "101"},
		{"idle timeout not int", map[string]string{TCPIdleTimeout: "4m"}, nil, TCPIdleTimeout, "4m"},
		{"disable tcp reset not bool", map[string]string{DisableTCPReset: "1"}, nil, DisableTCPReset, "1"},
		{"floating ip not bool", map[string]string{DisableFloatingIP: "on"}, nil, DisableFloatingIP, "on"},
		{"ha ports not bool", map[string]string{Internal: "true", HAPorts: "enabled"}, nil, HAPorts, "enabled"},
		{"probe protocol", map[string]string{ProbeProtocol: "grpc"}, nil, ProbeProtocol, "grpc"},
		{"probe path relative", map[string]string{ProbeRequestPath: "healthz"}, nil, ProbeRequestPath, "healthz"},
		{"probe interval low", map[string]string{ProbeInterval: "4"}, nil, ProbeInterval, "4"},
		{"probe num low", map[string]string{ProbeNumOfProbe: "1"}, nil, ProbeNumOfProbe, "1"},
		{"probe total too long", map[string]string{ProbeInterval: "30", ProbeNumOfProbe: "4"}, nil, ProbeInterval, "30"},
		{"per-port total too long", map[string]string{PortProbeKey(80, PortProbeInterval): "60"}, nil, PortProbeKey(80, PortProbeInterval), "60"},
		{"per-port protocol", map[string]string{PortProbeKey(80, PortProbeProtocol): "udp"}, nil, PortProbeKey(80, PortProbeProtocol), "udp"},
		{"per-port path", map[string]string{PortProbeKey(80, PortProbeRequestPath): "x"}, nil, PortProbeKey(80, PortProbeRequestPath), "x"},
		{"per-port num", map[string]string{PortProbeKey(80, PortProbeNumOfProbe): "zero"}, nil, PortProbeKey(80, PortProbeNumOfProbe), "zero"},
		{"per-port probe port unknown name", map[string]string{PortProbeKey(80, PortProbePort): "metrics"}, nil, PortProbeKey(80, PortProbePort), "metrics"},
		{"per-port probe port zero", map[string]string{PortProbeKey(80, PortProbePort): "0"}, nil, PortProbeKey(80, PortProbePort), "0"},
		{"per-port probe port too high", map[string]string{PortProbeKey(80, PortProbePort): "70000"}, nil, PortProbeKey(80, PortProbePort), "70000"},
		{"per-port probe port negative", map[string]string{PortProbeKey(80, PortProbePort): "-1"}, nil, PortProbeKey(80, PortProbePort), "-1"},
		{"per-port probe port past int32", map[string]string{PortProbeKey(80, PortProbePort): "99999999999"}, nil, PortProbeKey(80, PortProbePort), "99999999999"},
		{"no lb rule not bool", map[string]string{PortNoLBRuleKey(80): "x"}, nil, PortNoLBRuleKey(80), "x"},
		{"no probe rule not bool", map[string]string{PortNoProbeRuleKey(53): "x"}, nil, PortNoProbeRuleKey(53), "x"},
		{"allowed ranges with spec ranges", map[string]string{AllowedIPRanges: "10.0.0.0/8"}, func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8"} }, AllowedIPRanges, "10.0.0.0/8"},
		{"service tag bad", map[string]string{AllowedServiceTags: "Azure Cloud"}, nil, AllowedServiceTags, "Azure Cloud"},
		{"deny all not bool", map[string]string{DenyAllExceptLBSources: "sure"}, nil, DenyAllExceptLBSources, "sure"},
		{"disable nsg not bool", map[string]string{DisableNSGRule: "sure"}, nil, DisableNSGRule, "sure"},
		{"pls on public lb", map[string]string{PLSCreate: "true"}, nil, PLSCreate, "true"},
		{"pls on an IPv6-only service", map[string]string{Internal: "true", PLSCreate: "true"}, func(s *v1.Service) { s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol} }, PLSCreate, "true"},
		{"pls create not bool", map[string]string{PLSCreate: "y"}, nil, PLSCreate, "y"},
		{"pls name bad", map[string]string{PLSName: "bad name"}, nil, PLSName, "bad name"},
		{"pls rg bad", map[string]string{PLSResourceGroup: "a/b"}, nil, PLSResourceGroup, "a/b"},
		{"pls subnet bad", map[string]string{PLSSubnet: "a/b"}, nil, PLSSubnet, "a/b"},
		{"pls count high", map[string]string{PLSIPAddressCount: "9"}, nil, PLSIPAddressCount, "9"},
		{"pls ip bad", map[string]string{PLSIPAddresses: "10.0.0.300"}, nil, PLSIPAddresses, "10.0.0.300"},
		{"pls more ips than count", map[string]string{PLSIPAddresses: "10.0.0.4 10.0.0.5"}, nil, PLSIPAddresses, "10.0.0.4 10.0.0.5"},
		{"pls fqdn bad", map[string]string{PLSFQDNs: "a..b"}, nil, PLSFQDNs, "a..b"},
		{"pls proxy not bool", map[string]string{PLSProxyProtocol: "2"}, nil, PLSProxyProtocol, "2"},
		{"pls visibility mixed star", map[string]string{PLSVisibility: "* 00000000-0000-0000-0000-000000000002"}, nil, PLSVisibility, "*"},
		{"pls auto approval bad", map[string]string{PLSAutoApproval: "sub1"}, nil, PLSAutoApproval, "sub1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := svcWith(tc.ann)
			if tc.mod != nil {
				tc.mod(s)
			}
			o, err := Parse(s)
			if err == nil {
				t.Fatalf("want error, got %+v", o)
			}
			if o != nil {
				t.Fatal("options returned together with an error")
			}
			var found bool
			for _, e := range unwrapAll(err) {
				var ie *InvalidError
				if errors.As(e, &ie) && ie.Annotation == tc.wantKey && ie.Value == tc.wantVal {
					found = true
				}
			}
			if !found {
				t.Fatalf("error %q does not name %s=%q", err, tc.wantKey, tc.wantVal)
			}
			if !strings.Contains(err.Error(), tc.wantKey) {
				t.Fatalf("message %q lacks the annotation name", err)
			}
		})
	}
}

// TestParseLenient covers what the existing provider accepts and this parser accepts too, with a
// warning naming the part not applied as written.
func TestParseLenient(t *testing.T) {
	tests := []struct {
		name        string
		ann         map[string]string
		mod         func(*v1.Service)
		wantRanges  []string // SourceRanges then AllowedIPRanges
		wantInvalid []string
		wantWarn    []Warning
		check       func(t *testing.T, o *ServiceOptions)
	}{
		{name: "probe port not a service port", ann: map[string]string{PortProbeKey(80, PortProbePort): "8080"},
			wantWarn: []Warning{{Reason: ReasonProbePortNotServicePort, Annotation: PortProbeKey(80, PortProbePort), Value: "8080"}},
			check: func(t *testing.T, o *ServiceOptions) {
				if o.Port(80).Probe.Port != "8080" {
					t.Fatal(o.Port(80))
				}
			}},
		{name: "probe port of the service: no warning", ann: map[string]string{PortProbeKey(80, PortProbePort): "53"}},
		{name: "one malformed allowed range", ann: map[string]string{AllowedIPRanges: "10.0.0.0/8,10.0.0.0/x, 192.168.1.1"},
			wantRanges: []string{"10.0.0.0/8", "192.168.1.1/32"}, wantInvalid: []string{AllowedIPRanges + "=10.0.0.0/x"},
			wantWarn: []Warning{{Reason: ReasonSourceRangeIgnored, Annotation: AllowedIPRanges, Value: "10.0.0.0/x"}}},
		{name: "malformed core annotation entries", ann: map[string]string{CoreLBSourceRanges: "abc,1.2.3.0/24,300.1.1.1/8"},
			wantRanges: []string{"1.2.3.0/24"}, wantInvalid: []string{CoreLBSourceRanges + "=abc", CoreLBSourceRanges + "=300.1.1.1/8"},
			wantWarn: []Warning{{Reason: ReasonSourceRangeIgnored, Annotation: CoreLBSourceRanges, Value: "abc"},
				{Reason: ReasonSourceRangeIgnored, Annotation: CoreLBSourceRanges, Value: "300.1.1.1/8"}}},
		{name: "malformed spec range", mod: func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/33", "10.1.0.0/16"} },
			wantRanges: []string{"10.1.0.0/16"}, wantInvalid: []string{"spec.loadBalancerSourceRanges=10.0.0.0/33"},
			wantWarn: []Warning{{Reason: ReasonSourceRangeIgnored, Annotation: "spec.loadBalancerSourceRanges", Value: "10.0.0.0/33"}}},
		{name: "pip tags: pairs without a key or \"=\" skipped, values trimmed, empty value kept",
			ann:      map[string]string{PIPTags: "a=b,c= d,e =, =f"},
			wantWarn: []Warning{{Reason: ReasonPIPTagIgnored, Annotation: PIPTags, Value: " =f"}},
			check:    pipTags(map[string]string{"a": "b", "c": "d", "e": ""})},
		{name: "pip tags: no \"=\", two \"=\", empty entries", ann: map[string]string{PIPTags: " a=b,c,url=http://x?y=z,, "},
			wantWarn: []Warning{{Reason: ReasonPIPTagIgnored, Annotation: PIPTags, Value: "c"}, {Reason: ReasonPIPTagIgnored, Annotation: PIPTags, Value: "url=http://x?y=z"}},
			check:    pipTags(map[string]string{"a": "b"})},
		{name: "pip tags: a null value keeps its spaces", ann: map[string]string{PIPTags: "k= Null ,n=null,m= NULLX "},
			check: pipTags(map[string]string{"k": " Null ", "n": "null", "m": "NULLX"})},
		{name: "pip tags: a key given again takes the later value", ann: map[string]string{PIPTags: "a=1,A=2,b=x,a=3"},
			wantWarn: []Warning{{Reason: ReasonPIPTagIgnored, Annotation: PIPTags, Value: "a=1"}, {Reason: ReasonPIPTagIgnored, Annotation: PIPTags, Value: "A=2"}},
			check:    pipTags(map[string]string{"a": "3", "b": "x"})},
		{name: "pip tags: nothing usable", ann: map[string]string{PIPTags: "=x"},
			wantWarn: []Warning{{Reason: ReasonPIPTagIgnored, Annotation: PIPTags, Value: "=x"}}, check: pipTags(nil)},
		{name: "every allowed range malformed", ann: map[string]string{AllowedIPRanges: "x,y"},
			wantInvalid: []string{AllowedIPRanges + "=x", AllowedIPRanges + "=y"},
			wantWarn: []Warning{{Reason: ReasonSourceRangeIgnored, Annotation: AllowedIPRanges, Value: "x"},
				{Reason: ReasonSourceRangeIgnored, Annotation: AllowedIPRanges, Value: "y"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := svcWith(tc.ann)
			if tc.mod != nil {
				tc.mod(s)
			}
			o, err := Parse(s)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var ranges []string
			for _, p := range append(append([]netip.Prefix{}, o.SourceRanges...), o.AllowedIPRanges...) {
				ranges = append(ranges, p.String())
			}
			if !reflect.DeepEqual(ranges, tc.wantRanges) || !reflect.DeepEqual(o.InvalidRanges, tc.wantInvalid) {
				t.Fatalf("ranges %v invalid %v, want %v %v", ranges, o.InvalidRanges, tc.wantRanges, tc.wantInvalid)
			}
			if len(o.Warnings) != len(tc.wantWarn) {
				t.Fatalf("warnings %v, want %v", o.Warnings, tc.wantWarn)
			}
			for i, w := range tc.wantWarn {
				got := o.Warnings[i]
				if got.Reason != w.Reason || got.Annotation != w.Annotation || got.Value != w.Value || got.Message == "" ||
					!strings.Contains(got.String(), w.Annotation) {
					t.Fatalf("warning %d = %+v, want %+v", i, got, w)
				}
			}
			if tc.check != nil {
				tc.check(t, o)
			}
		})
	}
}

func pipTags(want map[string]string) func(t *testing.T, o *ServiceOptions) {
	return func(t *testing.T, o *ServiceOptions) {
		t.Helper()
		if !reflect.DeepEqual(o.PIPTags, want) {
			t.Fatalf("pip tags %q, want %q", o.PIPTags, want)
		}
	}
}

// Where users and tools match on the existing provider's messages, the error opens with them.
func TestParseMessagesOfTheExistingProvider(t *testing.T) {
	for _, tc := range []struct {
		name string
		ann  map[string]string
		mod  func(*v1.Service)
		want string
	}{
		{"probe port out of range", map[string]string{PortProbeKey(80, PortProbePort): "70000"}, nil,
			"failed to parse annotation service.beta.kubernetes.io/port_80_health-probe_port: port 70000 is out of range: " +
				"a probe port is a port of the service (number or name) or a port number between 1 and 65535"},
		{"probe port negative", map[string]string{PortProbeKey(80, PortProbePort): "-1"}, nil,
			"failed to parse annotation service.beta.kubernetes.io/port_80_health-probe_port: port -1 is out of range: "},
		{"probe port name not found", map[string]string{PortProbeKey(80, PortProbePort): "metrics"}, nil,
			"failed to parse annotation service.beta.kubernetes.io/port_80_health-probe_port: port metrics not found in service: "},
		{"non-public spec.loadBalancerIP", nil, func(s *v1.Service) { s.Spec.LoadBalancerIP = "10.0.0.5" },
			`external Service "default/web" cannot use non-public LoadBalancer IP "10.0.0.5"; use an internal LoadBalancer annotation or a valid Azure Public IP address: ` +
				"spec.loadBalancerIP=10.0.0.5 is a private, reserved or not a unicast address, which no public IP has"},
		{"non-public ipv6 annotation", map[string]string{IPv6: "fd00::1"}, nil,
			`external Service "default/web" cannot use non-public LoadBalancer IP "fd00::1"; `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := svcWith(tc.ann)
			if tc.mod != nil {
				tc.mod(s)
			}
			_, err := Parse(s)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to open with %q", err, tc.want)
			}
		})
	}
}

func TestParseReportsAllMistakes(t *testing.T) {
	_, err := Parse(svcWith(map[string]string{Internal: "x", TCPIdleTimeout: "1"}))
	if got := len(unwrapAll(err)); got != 2 {
		t.Fatalf("want 2 errors, got %d: %v", got, err)
	}
}

func unwrapAll(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
