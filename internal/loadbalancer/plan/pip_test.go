package plan

import (
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
	"github.com/azure-ccm/azure-ccm/internal/tags"
)

func pip(name, ip string, v armnetwork.IPVersion, tags map[string]string) *armnetwork.PublicIPAddress {
	p := &armnetwork.PublicIPAddress{Name: to.Ptr(name), ID: to.Ptr(pipRG + name), Location: to.Ptr("eastus"),
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{PublicIPAddressVersion: to.Ptr(v)}}
	if ip != "" {
		p.Properties.IPAddress = to.Ptr(ip)
	}
	if tags != nil {
		p.Tags = map[string]*string{}
		for k, val := range tags {
			p.Tags[k] = to.Ptr(val)
		}
	}
	return p
}

func tag(p *armnetwork.PublicIPAddress, k string) string {
	if v, ok := p.Tags[k]; ok && v != nil {
		return *v
	}
	return "<none>"
}

func TestPlanPublicIPsCreatesManagedPIP(t *testing.T) {
	c := cluster()
	c.TagPolicy = tags.Policy{Config: map[string]string{"env": "prod"}}
	prefix := "/subscriptions/" + sub + "/resourceGroups/rg/providers/Microsoft.Network/publicIPPrefixes/pfx"
	s := mkService(t, uidA, "a", withAnn(annotations.PIPIPTags, "RoutingPreference=Internet"), withAnn(annotations.PIPTags, "team=web"),
		withAnn(annotations.DNSLabelName, "myapp"), withAnn(annotations.PIPPrefixID, prefix))
	plans, err := PlanPublicIPs(c, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 1 || plans[0].Name != "kubernetes-"+svcA+"-pfx" || plans[0].Existing != nil || plans[0].UserOwned || plans[0].Mutate == nil {
		t.Fatalf("%+v", plans)
	}
	p, err := plans[0].Mutate(nil)
	if err != nil {
		t.Fatal(err)
	}
	pp := p.Properties
	checks := []struct {
		what      string
		got, want any
	}{
		{"sku", *p.SKU.Name, armnetwork.PublicIPAddressSKUNameStandard},
		{"location", *p.Location, "eastus"},
		{"allocation", *pp.PublicIPAllocationMethod, armnetwork.IPAllocationMethodStatic},
		{"version", *pp.PublicIPAddressVersion, armnetwork.IPVersionIPv4},
		{"zones", len(p.Zones), 3},
		{"ip tag", *pp.IPTags[0].IPTagType + "=" + *pp.IPTags[0].Tag, "RoutingPreference=Internet"},
		{"prefix", *pp.PublicIPPrefix.ID, prefix},
		{"dns", *pp.DNSSettings.DomainNameLabel, "myapp"},
		{"service tag", tag(p, naming.TagService), "ns/a"},
		{"cluster tag", tag(p, naming.TagClusterName), "kubernetes"},
		{"dns tag", tag(p, naming.TagDNSLabelService), "ns/a"},
		{"config tag", tag(p, "env"), "prod"},
		{"annotation tag", tag(p, "team"), "web"},
	}
	for _, ck := range checks {
		if ck.got != ck.want {
			t.Errorf("%s: got %v want %v", ck.what, ck.got, ck.want)
		}
	}
	// Re-running the mutation over the stored PIP changes nothing (no PUT in steady state).
	stored := clone(t, p)
	stored.Properties.IPAddress = to.Ptr("203.0.113.4")
	before := mustJSON(t, stored)
	again, err := plans[0].Mutate(stored)
	if err != nil || mustJSON(t, again) != before {
		t.Fatalf("not idempotent: %v\n%s\n%s", err, before, mustJSON(t, again))
	}
}

func TestPlanPublicIPsSelection(t *testing.T) {
	managedA := pip("kubernetes-"+svcA, "203.0.113.1", armnetwork.IPVersionIPv4, map[string]string{naming.TagService: "ns/a", naming.TagClusterName: "kubernetes"})
	userPIP := pip("user-pip", "203.0.113.2", armnetwork.IPVersionIPv4, map[string]string{"owner": "me"})
	otherCluster := pip("other", "203.0.113.3", armnetwork.IPVersionIPv4, map[string]string{naming.TagService: "ns/x", naming.TagClusterName: "other"})
	legacy := pip("legacy", "203.0.113.5", armnetwork.IPVersionIPv4, map[string]string{"service": "ns/old"})
	v6 := pip("v6", "2001:db8::1", armnetwork.IPVersionIPv6, map[string]string{naming.TagService: "ns/z"})
	existing := []*armnetwork.PublicIPAddress{managedA, userPIP, otherCluster, legacy, v6}
	tests := []struct {
		name      string
		uid       string
		opts      []svcOpt
		wantName  []string
		userOwned bool
		wantErr   string
		tagAfter  string // service tag after Mutate
	}{
		{name: "own managed PIP is reused", uid: uidA, wantName: []string{"kubernetes-" + svcA}, tagAfter: "ns/a"},
		{name: "new PIP when none exists", uid: uidB, wantName: []string{"kubernetes-" + svcB}, tagAfter: "ns/b"},
		{name: "sharing a managed PIP by address adds the service", uid: uidB, opts: []svcOpt{withAnn(annotations.IPv4, "203.0.113.1")},
			wantName: []string{"kubernetes-" + svcA}, tagAfter: "ns/a,ns/b"},
		{name: "spec.loadBalancerIP selects by address", uid: uidB, opts: []svcOpt{func(s *svcT) { s.Spec.LoadBalancerIP = "203.0.113.1" }},
			wantName: []string{"kubernetes-" + svcA}, tagAfter: "ns/a,ns/b"},
		{name: "user PIP by name is used untouched", uid: uidB, opts: []svcOpt{withAnn(annotations.PIPName, "user-pip")}, wantName: []string{"user-pip"}, userOwned: true},
		{name: "user PIP by address is used untouched", uid: uidB, opts: []svcOpt{withAnn(annotations.IPv4, "203.0.113.2")}, wantName: []string{"user-pip"}, userOwned: true},
		{name: "another cluster's PIP is not ours", uid: uidB, opts: []svcOpt{withAnn(annotations.PIPName, "other")}, wantName: []string{"other"}, userOwned: true},
		{name: "legacy service tag is managed and migrated", uid: uidB, opts: []svcOpt{withAnn(annotations.PIPName, "legacy")}, wantName: []string{"legacy"}, tagAfter: "ns/old,ns/b"},
		{name: "missing PIP name", uid: uidB, opts: []svcOpt{withAnn(annotations.PIPName, "nope")}, wantErr: "does not exist"},
		{name: "missing address", uid: uidB, opts: []svcOpt{withAnn(annotations.IPv4, "198.51.100.9")}, wantErr: "no public IP with address"},
		{name: "family mismatch", uid: uidB, opts: []svcOpt{withAnn(annotations.PIPName, "v6")}, wantErr: "is IPv6"},
		{name: "dual-stack names", uid: uidB, opts: []svcOpt{dualStack}, wantName: []string{"kubernetes-" + svcB, "kubernetes-" + svcB + "-IPv6"}, tagAfter: "ns/b"},
		{name: "single-stack IPv6 name has no suffix", uid: uidB, opts: []svcOpt{ipv6Only}, wantName: []string{"kubernetes-" + svcB}, tagAfter: "ns/b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name := map[string]string{uidA: "a", uidB: "b"}[tc.uid]
			s := mkService(t, tc.uid, name, tc.opts...)
			plans, err := PlanPublicIPs(cluster(), s, existing)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want error %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(plans) != len(tc.wantName) {
				t.Fatalf("plans %+v", plans)
			}
			for i, p := range plans {
				if p.Name != tc.wantName[i] || p.UserOwned != tc.userOwned || (p.Mutate == nil) != tc.userOwned {
					t.Fatalf("plan %d: %+v", i, p)
				}
				if p.UserOwned {
					continue
				}
				var cur *armnetwork.PublicIPAddress
				if p.Existing != nil {
					cur = clone(t, p.Existing)
				}
				got, err := p.Mutate(cur)
				if err != nil {
					t.Fatal(err)
				}
				if tag(got, naming.TagService) != tc.tagAfter || tag(got, "service") != "<none>" {
					t.Fatalf("service tag %q (legacy %q), want %q", tag(got, naming.TagService), tag(got, "service"), tc.tagAfter)
				}
				if p.Family == naming.IPv6 && *got.Properties.PublicIPAddressVersion != armnetwork.IPVersionIPv6 {
					t.Fatal("IPv6 PIP created as IPv4")
				}
			}
		})
	}
}

func TestUnbindAndRelease(t *testing.T) {
	c := cluster()
	shared := pip("kubernetes-"+svcA, "203.0.113.1", armnetwork.IPVersionIPv4, map[string]string{
		naming.TagService: "ns/a,ns/b", naming.TagClusterName: "kubernetes", naming.TagDNSLabelService: "ns/b"})
	shared.Properties.DNSSettings = &armnetwork.PublicIPAddressDNSSettings{DomainNameLabel: to.Ptr("b")}
	got, err := UnbindPIP(c, clone(t, shared), "ns/b")
	if err != nil || got == nil || tag(got, naming.TagService) != "ns/a" || got.Properties.DNSSettings != nil || tag(got, naming.TagDNSLabelService) != "<none>" {
		t.Fatalf("unbind b: %v %s", err, mustJSON(t, got))
	}
	if got, _ := UnbindPIP(c, got, "ns/a"); got != nil {
		t.Fatal("last service gone: the managed PIP must be deleted")
	}
	user := pip("user", "203.0.113.8", armnetwork.IPVersionIPv4, nil)
	if got, _ := UnbindPIP(c, user, "ns/a"); got != user {
		t.Fatal("user PIP touched")
	}

	// Releasable: the service switched to a user PIP; its old managed PIP is released.
	s := mkService(t, uidA, "a", withAnn(annotations.PIPName, "user"))
	old := pip("kubernetes-"+svcA, "203.0.113.1", armnetwork.IPVersionIPv4, map[string]string{naming.TagService: "ns/a"})
	existing := []*armnetwork.PublicIPAddress{old, user, shared}
	plans, err := PlanPublicIPs(c, s, existing)
	if err != nil {
		t.Fatal(err)
	}
	rel := ReleasablePIPs(c, s.Key(), "rg", listedIn("rg", existing...), plans)
	if len(rel) != 2 || *rel[0].PIP.Name != "kubernetes-"+svcA || rel[0].RG != "rg" {
		t.Fatalf("releasable %v", rel)
	}
	if UserChosen(s, old) || !UserChosen(s, user) {
		t.Fatal("UserChosen")
	}
	s2 := mkService(t, uidA, "a", withAnn(annotations.IPv4, "203.0.113.1"))
	if !UserChosen(s2, old) {
		t.Fatal("UserChosen by address")
	}
	if a, ok := PIPAddress(old); !ok || a.String() != "203.0.113.1" {
		t.Fatal("PIPAddress")
	}
}

// TestUnbindDecidesByTags: the last service leaving a managed PIP deletes it, however the
// services named it; how the leaving service referred to it does not matter, only the tags.
func TestUnbindDecidesByTags(t *testing.T) {
	c := cluster()
	tests := []struct {
		name       string
		tags       map[string]string
		key        string
		wantDelete bool
		wantTag    string // service tag when kept
	}{
		{name: "last service of a managed PIP", tags: map[string]string{naming.TagService: "ns/a", naming.TagClusterName: "kubernetes"}, key: "ns/a", wantDelete: true},
		{name: "last of a shared PIP named by address or pip-name", tags: map[string]string{naming.TagService: "ns/b", naming.TagClusterName: "kubernetes"}, key: "ns/b", wantDelete: true},
		{name: "legacy keys, no cluster tag", tags: map[string]string{"service": "ns/a"}, key: "ns/a", wantDelete: true},
		{name: "another service still on it", tags: map[string]string{naming.TagService: "ns/a,ns/b", naming.TagClusterName: "kubernetes"}, key: "ns/a", wantTag: "ns/b"},
		{name: "service not on it", tags: map[string]string{naming.TagService: "ns/b", naming.TagClusterName: "kubernetes"}, key: "ns/a", wantTag: "ns/b"},
		{name: "another cluster's", tags: map[string]string{naming.TagService: "ns/a", naming.TagClusterName: "other"}, key: "ns/a", wantTag: "ns/a"},
		{name: "a user's (no service tag)", tags: map[string]string{"owner": "me"}, key: "ns/a", wantTag: "<none>"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := pip("p", "203.0.113.9", armnetwork.IPVersionIPv4, tc.tags)
			got, err := UnbindPIP(c, p, tc.key)
			if err != nil {
				t.Fatal(err)
			}
			if (got == nil) != tc.wantDelete {
				t.Fatalf("deleted=%v, want %v", got == nil, tc.wantDelete)
			}
			if got != nil && tag(got, naming.TagService) != tc.wantTag {
				t.Fatalf("service tag %q, want %q", tag(got, naming.TagService), tc.wantTag)
			}
		})
	}
}

func listedIn(rg string, ps ...*armnetwork.PublicIPAddress) []ListedPIP {
	out := make([]ListedPIP, 0, len(ps))
	for _, p := range ps {
		out = append(out, ListedPIP{RG: rg, PIP: p})
	}
	return out
}

func TestDNSLabelOnlyRemovedByOwner(t *testing.T) {
	c := cluster()
	p := pip("kubernetes-"+svcA, "203.0.113.1", armnetwork.IPVersionIPv4, map[string]string{
		naming.TagService: "ns/a,ns/b", naming.TagDNSLabelService: "ns/a"})
	p.Properties.DNSSettings = &armnetwork.PublicIPAddressDNSSettings{DomainNameLabel: to.Ptr("a")}
	b := mkService(t, uidB, "b", withAnn(annotations.IPv4, "203.0.113.1"), withAnn(annotations.DNSLabelName, ""))
	plans, err := PlanPublicIPs(c, b, []*armnetwork.PublicIPAddress{p})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := plans[0].Mutate(clone(t, p))
	if got.Properties.DNSSettings == nil || *got.Properties.DNSSettings.DomainNameLabel != "a" {
		t.Fatal("b removed a's DNS label")
	}
	a := mkService(t, uidA, "a", withAnn(annotations.DNSLabelName, ""))
	plans, _ = PlanPublicIPs(c, a, []*armnetwork.PublicIPAddress{p})
	got, _ = plans[0].Mutate(clone(t, p))
	if got.Properties.DNSSettings != nil || tag(got, naming.TagDNSLabelService) != "<none>" {
		t.Fatal("owner could not remove its DNS label")
	}
}
