package plan

import (
	"sort"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"

	"github.com/azure-ccm/azure-ccm/internal/tags"
)

func showTags(t map[string]*string) string {
	var out []string
	for k, v := range t {
		out = append(out, k+"="+*v)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// The configured tags reach an existing load balancer and the NSG on every write of a service
// (not only when they are created); a user's own tag stays unless systemTags says otherwise.
func TestConfigTagsOnLoadBalancerAndNSG(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy tags.Policy
		start  map[string]*string
		want   string
	}{
		{name: "no configured tags: untouched", policy: tags.Parse("", nil, "owner"), start: map[string]*string{"user": to.Ptr("x")}, want: "user=x"},
		{name: "changed value, user tag kept", policy: tags.Parse("env=prod", nil, ""),
			start: map[string]*string{"env": to.Ptr("dev"), "user": to.Ptr("x")}, want: "env=prod,user=x"},
		{name: "systemTags: only configured and system tags stay", policy: tags.Parse("env=prod", nil, "owner"),
			start: map[string]*string{"user": to.Ptr("x"), "Owner": to.Ptr("me")}, want: "Owner=me,env=prod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cluster()
			c.TagPolicy = tc.policy
			s := mkService(t, uidA, "a")
			lb, err := ApplyService(nil, c, s, publicFronts(s, "p"))
			if err != nil {
				t.Fatal(err)
			}
			lb.Tags = map[string]*string{}
			for k, v := range tc.start {
				lb.Tags[k] = to.Ptr(*v)
			}
			lb, err = ApplyService(lb, c, s, publicFronts(s, "p"))
			if err != nil {
				t.Fatal(err)
			}
			if got := showTags(lb.Tags); got != tc.want {
				t.Errorf("load balancer tags %s, want %s", got, tc.want)
			}
			g := nsg()
			g.Tags = map[string]*string{}
			for k, v := range tc.start {
				g.Tags[k] = to.Ptr(*v)
			}
			g, err = ApplySecurity(g, SecurityInput{Service: s, Want: true, Destinations: addrs("203.0.113.5"), Tags: tc.policy})
			if err != nil {
				t.Fatal(err)
			}
			if got := showTags(g.Tags); got != tc.want {
				t.Errorf("NSG tags %s, want %s", got, tc.want)
			}
		})
	}
}

// In an edge zone, created load balancers and public IPs carry extendedLocation and no zones
// (NRP refuses zones there); internal frontends get none either.
func TestEdgeZone(t *testing.T) {
	c := cluster()
	c.EdgeZone = "microsoftlosangeles1"
	s := mkService(t, uidA, "a")
	plans, err := PlanPublicIPs(c, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	pip, err := plans[0].Mutate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if pip.ExtendedLocation == nil || *pip.ExtendedLocation.Name != c.EdgeZone || *pip.ExtendedLocation.Type != "EdgeZone" || len(pip.Zones) != 0 {
		t.Fatalf("public IP %s", mustJSON(t, pip))
	}
	lb, err := ApplyService(nil, c, s, publicFronts(s, "p"))
	if err != nil || lb.ExtendedLocation == nil || *lb.ExtendedLocation.Name != c.EdgeZone {
		t.Fatalf("load balancer %v %s", err, mustJSON(t, lb))
	}
	in := mkService(t, uidB, "b", withAnn("service.beta.kubernetes.io/azure-load-balancer-internal", "true"))
	ilb, err := ApplyService(nil, c, in, []Frontend{internalFront("IPv4")})
	if err != nil || len(ilb.Properties.FrontendIPConfigurations[0].Zones) != 0 {
		t.Fatalf("internal frontend %v %s", err, mustJSON(t, ilb))
	}
	// In the region: zones as before.
	c.EdgeZone = ""
	if plans, err = PlanPublicIPs(c, s, nil); err != nil {
		t.Fatal(err)
	}
	if pip, err = plans[0].Mutate(nil); err != nil || pip.ExtendedLocation != nil || len(pip.Zones) != 3 {
		t.Fatalf("regional public IP %s", mustJSON(t, pip))
	}
}
