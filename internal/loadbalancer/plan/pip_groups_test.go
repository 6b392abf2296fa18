package plan

import (
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
)

func TestPublicIPGroups(t *testing.T) {
	tests := []struct {
		name     string
		cfg      config.Config
		recorded []string
		extra    []string
		want     string
	}{
		{name: "resourceGroup only", cfg: config.Config{ResourceGroup: "rg"}, want: "rg"},
		{name: "load balancer group too", cfg: config.Config{ResourceGroup: "rg", LoadBalancerResourceGroup: "rg-lb"}, want: "rg,rg-lb"},
		{name: "recorded and named groups, once each, case-insensitively", cfg: config.Config{ResourceGroup: "rg"},
			recorded: []string{"RG-Pips", "rg-old"}, extra: []string{"rg-pips", "RG", "", "rg-new"}, want: "rg,rg-new,rg-old,RG-Pips"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.Join(PublicIPGroups(&tc.cfg, tc.recorded, tc.extra...), ","); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
	cfg := &config.Config{ResourceGroup: "rg", LoadBalancerResourceGroup: "rg-lb"}
	for rg, want := range map[string]bool{"rg": false, "RG-LB": false, "rg-pips": true} {
		if got := NeedsRecord(cfg, rg); got != want {
			t.Errorf("NeedsRecord(%s) = %v, want %v", rg, got, want)
		}
	}
}

// TestReleasableAcrossGroups: a service whose resource-group annotation changed releases its
// managed PIP in the old group, even one with the name its new plan has in the new group.
func TestReleasableAcrossGroups(t *testing.T) {
	c := cluster()
	owned := map[string]string{naming.TagService: "ns/a", naming.TagClusterName: "kubernetes"}
	oldSameName := pip("kubernetes-"+svcA, "203.0.113.1", armnetwork.IPVersionIPv4, owned)
	newSameName := pip("kubernetes-"+svcA, "203.0.113.2", armnetwork.IPVersionIPv4, owned)
	otherService := pip("kubernetes-"+svcB, "203.0.113.3", armnetwork.IPVersionIPv4, map[string]string{naming.TagService: "ns/b", naming.TagClusterName: "kubernetes"})
	userInNew := pip("user", "203.0.113.4", armnetwork.IPVersionIPv4, nil)
	listed := append(listedIn("rg", oldSameName, otherService), listedIn("rg-new", newSameName, userInNew)...)

	t.Run("default name in the new group", func(t *testing.T) {
		s := mkService(t, uidA, "a", withAnn(annotations.ResourceGroup, "rg-new"))
		plans, err := PlanPublicIPs(c, s, []*armnetwork.PublicIPAddress{newSameName, userInNew})
		if err != nil {
			t.Fatal(err)
		}
		rel := ReleasablePIPs(c, s.Key(), "RG-New", listed, plans)
		if len(rel) != 1 || rel[0].RG != "rg" || rel[0].PIP != oldSameName {
			t.Fatalf("releasable %+v", rel)
		}
	})
	t.Run("user PIP in the new group", func(t *testing.T) {
		s := mkService(t, uidA, "a", withAnn(annotations.ResourceGroup, "rg-new"), withAnn(annotations.PIPName, "user"))
		plans, err := PlanPublicIPs(c, s, []*armnetwork.PublicIPAddress{newSameName, userInNew})
		if err != nil {
			t.Fatal(err)
		}
		rel := ReleasablePIPs(c, s.Key(), "rg-new", listed, plans)
		if len(rel) != 2 || rel[0].PIP != oldSameName || rel[1].PIP != newSameName {
			t.Fatalf("releasable %+v", rel)
		}
	})
	if b := BoundPIPs(c, "ns/a", listed); len(b) != 2 || b[0].RG != "rg" || b[1].RG != "rg-new" {
		t.Fatalf("bound %+v", b)
	}
}

func TestSweepPIP(t *testing.T) {
	c := cluster()
	frontend := &armnetwork.IPConfiguration{ID: to.Ptr(lbID + "/frontendIPConfigurations/" + svcA)}
	tests := []struct {
		name      string
		tags      map[string]string
		attached  bool
		gone      []string
		candidate bool
		want      string // "deleted", "unchanged" or the service tag after
	}{
		{name: "every service gone", tags: map[string]string{naming.TagService: "ns/a,ns/b", naming.TagClusterName: "kubernetes"},
			gone: []string{"ns/a", "ns/b"}, candidate: true, want: "deleted"},
		{name: "empty service tag", tags: map[string]string{naming.TagService: "", naming.TagClusterName: "kubernetes"}, candidate: true, want: "deleted"},
		{name: "legacy cluster tag", tags: map[string]string{naming.LegacyTagService: "ns/a", naming.LegacyTagClusterName: "kubernetes"},
			gone: []string{"ns/a"}, candidate: true, want: "deleted"},
		{name: "one service left", tags: map[string]string{naming.TagService: "ns/a,ns/b", naming.TagClusterName: "kubernetes"},
			gone: []string{"ns/a"}, candidate: true, want: "ns/b"},
		{name: "a service added since the decision stays", tags: map[string]string{naming.TagService: "ns/c", naming.TagClusterName: "kubernetes"},
			gone: []string{"ns/a"}, candidate: true, want: "unchanged"},
		{name: "attached: unbound, deleted by a later pass", tags: map[string]string{naming.TagService: "ns/a", naming.TagClusterName: "kubernetes"},
			attached: true, gone: []string{"ns/a"}, candidate: true, want: ""},
		{name: "no cluster tag: may be a user's", tags: map[string]string{"service": "frontend"}, gone: []string{"frontend"}, want: "unchanged"},
		{name: "another cluster's", tags: map[string]string{naming.TagService: "ns/a", naming.TagClusterName: "other"}, gone: []string{"ns/a"}, want: "unchanged"},
		{name: "cluster tag without service tag", tags: map[string]string{naming.TagClusterName: "kubernetes"}, want: "unchanged"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := pip("p", "203.0.113.9", armnetwork.IPVersionIPv4, tc.tags)
			if tc.attached {
				p.Properties.IPConfiguration = frontend
			}
			if got := len(SweepCandidates(c, listedIn("rg", p, p))); got != map[bool]int{true: 1, false: 0}[tc.candidate] {
				t.Fatalf("candidates %d, want candidate=%v", got, tc.candidate)
			}
			gone := map[string]bool{}
			for _, k := range tc.gone {
				gone[k] = true
			}
			before := mustJSON(t, p)
			if due := SweepDue(c, p, gone); due != (tc.want != "unchanged") || mustJSON(t, p) != before {
				t.Fatalf("SweepDue = %v for %q (or it changed the PIP)", due, tc.want)
			}
			got := SweepPIP(c, clone(t, p), gone)
			switch {
			case tc.want == "deleted":
				if got != nil {
					t.Fatalf("kept: %s", mustJSON(t, got))
				}
			case got == nil:
				t.Fatal("deleted")
			case tc.want == "unchanged":
				if mustJSON(t, got) != before {
					t.Fatalf("changed: %s", mustJSON(t, got))
				}
			default:
				if tag(got, naming.TagService) != tc.want {
					t.Fatalf("service tag %q, want %q", tag(got, naming.TagService), tc.want)
				}
			}
		})
	}
	// The DNS label of a gone service goes with it.
	p := pip("p", "203.0.113.9", armnetwork.IPVersionIPv4, map[string]string{naming.TagService: "ns/a,ns/b",
		naming.TagClusterName: "kubernetes", naming.TagDNSLabelService: "ns/a"})
	p.Properties.DNSSettings = &armnetwork.PublicIPAddressDNSSettings{DomainNameLabel: to.Ptr("a")}
	got := SweepPIP(c, p, map[string]bool{"ns/a": true})
	if got == nil || got.Properties.DNSSettings != nil || tag(got, naming.TagDNSLabelService) != "<none>" {
		t.Fatalf("DNS label of the gone service kept: %s", mustJSON(t, got))
	}
}
