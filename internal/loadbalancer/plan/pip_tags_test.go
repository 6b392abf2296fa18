package plan

import (
	"sort"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
	"github.com/azure-ccm/azure-ccm/internal/tags"
)

func tagString(p *armnetwork.PublicIPAddress) string {
	var out []string
	for k, v := range p.Tags {
		out = append(out, k+"="+*v)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// Tags of a managed public IP on a reconcile of service ns/a: configuration tags, azure-pip-tags
// (both ways: a key the annotation no longer names goes), systemTags, a user's own tag.
func TestTagPIP(t *testing.T) {
	own := map[string]string{naming.TagService: "ns/a", naming.TagClusterName: "kubernetes"}
	with := func(extra ...string) map[string]string {
		out := map[string]string{}
		for k, v := range own {
			out[k] = v
		}
		for i := 0; i < len(extra); i += 2 {
			out[extra[i]] = extra[i+1]
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		policy tags.Policy
		ann    string // azure-pip-tags ("" = absent)
		tags   map[string]string
		want   string
	}{
		{name: "config tag added, user tag kept", policy: tags.Parse("env=prod", nil, ""), tags: with("user", "mine"),
			want: "env=prod,k8s-azure-cluster-name=kubernetes,k8s-azure-service=ns/a,user=mine"},
		{name: "config value changed", policy: tags.Parse("env=prod", nil, ""), tags: with("env", "dev"),
			want: "env=prod,k8s-azure-cluster-name=kubernetes,k8s-azure-service=ns/a"},
		{name: "annotation tag added and recorded, wins over config", policy: tags.Parse("team=ops", nil, ""), ann: "team=web,cost=1",
			tags: with(), want: "cost=1,k8s-azure-cluster-name=kubernetes,k8s-azure-pip-tag-keys=cost,team,k8s-azure-service=ns/a,team=web"},
		{name: "annotation key removed: tag removed, user tag kept", ann: "team=web",
			tags: with("team", "web", "cost", "1", naming.TagPIPTagKeys, "cost,team", "user", "mine"),
			want: "k8s-azure-cluster-name=kubernetes,k8s-azure-pip-tag-keys=team,k8s-azure-service=ns/a,team=web,user=mine"},
		{name: "annotation removed entirely", tags: with("team", "web", naming.TagPIPTagKeys, "team"),
			want: "k8s-azure-cluster-name=kubernetes,k8s-azure-service=ns/a"},
		{name: "annotation key removed but configured: the config value stays", policy: tags.Parse("team=ops", nil, ""),
			tags: with("team", "web", naming.TagPIPTagKeys, "team"),
			want: "k8s-azure-cluster-name=kubernetes,k8s-azure-service=ns/a,team=ops"},
		{name: "shared public IP: keys only added", ann: "b=2",
			tags: map[string]string{naming.TagService: "ns/a,ns/other", naming.TagClusterName: "kubernetes", "a": "1", naming.TagPIPTagKeys: "a"},
			want: "a=1,b=2,k8s-azure-cluster-name=kubernetes,k8s-azure-pip-tag-keys=a,b,k8s-azure-service=ns/a,ns/other"},
		{name: "systemTags: user tag removed, system and ownership tags kept", policy: tags.Parse("env=prod", nil, "owner"), ann: "team=web",
			tags: with("user", "mine", "owner", "me", naming.TagDNSLabelService, "ns/a"),
			want: "env=prod,k8s-azure-cluster-name=kubernetes,k8s-azure-dns-label-service=ns/a,k8s-azure-pip-tag-keys=team,k8s-azure-service=ns/a,owner=me,team=web"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cluster()
			c.TagPolicy = tc.policy
			var opts []svcOpt
			if tc.ann != "" {
				opts = append(opts, withAnn(annotations.PIPTags, tc.ann))
			}
			s := mkService(t, uidA, "a", opts...)
			p := pip("kubernetes-"+svcA, "203.0.113.4", armnetwork.IPVersionIPv4, tc.tags)
			tagPIP(c, s, p)
			if got := tagString(p); got != tc.want {
				t.Fatalf("tags\n got %s\nwant %s", got, tc.want)
			}
			before := tagString(p)
			tagPIP(c, s, p)
			if tagString(p) != before {
				t.Fatal("not idempotent")
			}
		})
	}
}

func TestDecideIPTags(t *testing.T) {
	ipTags := func(kv ...string) []*armnetwork.IPTag {
		var out []*armnetwork.IPTag
		for i := 0; i < len(kv); i += 2 {
			out = append(out, &armnetwork.IPTag{IPTagType: to.Ptr(kv[i]), Tag: to.Ptr(kv[i+1])})
		}
		return out
	}
	owned := map[string]string{naming.TagService: "ns/a"}
	for _, tc := range []struct {
		name     string
		ann      *string
		mutation bool
		cur      []*armnetwork.IPTag
		tags     map[string]string
		prefix   bool
		pipName  string
		want     IPTagAction
		reason   string
	}{
		{name: "no annotation: left alone", cur: ipTags("RoutingPreference", "Internet"), tags: owned, want: IPTagsKeep},
		{name: "same tags", ann: to.Ptr("RoutingPreference=Internet"), cur: ipTags("RoutingPreference", "Internet"), tags: owned, want: IPTagsKeep},
		{name: "changed: re-created", ann: to.Ptr("RoutingPreference=Internet"), tags: owned, want: IPTagsRecreate, reason: "address changes"},
		{name: "empty annotation removes: re-created", ann: to.Ptr(""), cur: ipTags("FirstPartyUsage", "/Prod"), tags: owned, want: IPTagsRecreate},
		{name: "mutation: FirstPartyUsage in place", ann: to.Ptr("FirstPartyUsage=/NonProd"), mutation: true,
			cur: ipTags("FirstPartyUsage", "/Prod"), tags: owned, want: IPTagsUpdate},
		{name: "mutation: other types refused", ann: to.Ptr("RoutingPreference=Internet"), mutation: true, tags: owned,
			want: IPTagsRefuse, reason: "RoutingPreference"},
		{name: "shared: refused", ann: to.Ptr("RoutingPreference=Internet"), tags: map[string]string{naming.TagService: "ns/a,ns/b"},
			want: IPTagsRefuse, reason: "shared"},
		{name: "named by the service: refused", ann: to.Ptr("RoutingPreference=Internet"), tags: owned, pipName: "mine",
			want: IPTagsRefuse, reason: "named by the service"},
		{name: "from a prefix: refused", ann: to.Ptr("RoutingPreference=Internet"), tags: owned, prefix: true, want: IPTagsRefuse, reason: "prefix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cluster()
			c.IPTagMutation = tc.mutation
			var opts []svcOpt
			if tc.ann != nil {
				opts = append(opts, withAnn(annotations.PIPIPTags, *tc.ann))
			}
			name := "kubernetes-" + svcA
			if tc.pipName != "" {
				name = tc.pipName
				opts = append(opts, withAnn(annotations.PIPName, name))
			}
			s := mkService(t, uidA, "a", opts...)
			p := pip(name, "203.0.113.4", armnetwork.IPVersionIPv4, tc.tags)
			p.Properties.IPTags = tc.cur
			if tc.prefix {
				p.Properties.PublicIPPrefix = &armnetwork.SubResource{ID: to.Ptr("/prefix")}
			}
			d := DecideIPTags(c, s, p)
			if d.Action != tc.want || !strings.Contains(d.Reason, tc.reason) {
				t.Fatalf("got %+v, want action %d with %q", d, tc.want, tc.reason)
			}
			if (d.Action == IPTagsRefuse || d.Action == IPTagsRecreate) && !strings.Contains(d.Reason, annotations.PIPIPTags) {
				t.Fatalf("reason %q does not name the annotation", d.Reason)
			}
		})
	}
}

// A FirstPartyUsage change with enableIPTagMutationForExistingPublicIP goes into the PIP's
// mutation; the configuration's tags too.
func TestPlanPublicIPsUpdatesIPTagsInPlace(t *testing.T) {
	c := cluster()
	c.IPTagMutation = true
	c.TagPolicy = tags.Parse("env=prod", nil, "")
	s := mkService(t, uidA, "a", withAnn(annotations.PIPIPTags, "FirstPartyUsage=/NonProd"))
	cur := pip("kubernetes-"+svcA, "203.0.113.4", armnetwork.IPVersionIPv4, map[string]string{naming.TagService: "ns/a"})
	cur.Properties.IPTags = []*armnetwork.IPTag{{IPTagType: to.Ptr("FirstPartyUsage"), Tag: to.Ptr("/Prod")}}
	plans, err := PlanPublicIPs(c, s, []*armnetwork.PublicIPAddress{cur})
	if err != nil || len(plans) != 1 || plans[0].IPTags.Action != IPTagsUpdate {
		t.Fatalf("%+v %v", plans, err)
	}
	got, err := plans[0].Mutate(clone(t, cur))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Properties.IPTags) != 1 || *got.Properties.IPTags[0].Tag != "/NonProd" || tag(got, "env") != "prod" {
		t.Fatalf("ip tags %v, env %s", got.Properties.IPTags, tag(got, "env"))
	}
}
