package tags

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
)

func m(kv ...string) map[string]*string {
	out := map[string]*string{}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i]] = to.Ptr(kv[i+1])
	}
	return out
}

func show(tags map[string]*string) string {
	var parts []string
	for k, v := range tags {
		parts = append(parts, k+"="+deref(v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		csv    string
		m      map[string]string
		system string
		want   string
		sys    []string
	}{
		{csv: "", want: "map[]"},
		{csv: " a = 1 , b=2,broken,=x", want: "map[a:1 b:2]"},
		{csv: "a=1,A=2", want: "map[A:2]"},
		{csv: "a=1", m: map[string]string{"A": "3", "c": "4"}, want: "map[A:3 c:4]"},
		{system: " owner , ,team", want: "map[]", sys: []string{"owner", "team"}},
	} {
		p := Parse(tc.csv, tc.m, tc.system)
		if got := fmt.Sprint(p.Config); got != tc.want && !(tc.want == "map[]" && p.Config == nil) {
			t.Errorf("Parse(%q, %v) config %s, want %s", tc.csv, tc.m, got, tc.want)
		}
		if fmt.Sprint(p.System) != fmt.Sprint(tc.sys) {
			t.Errorf("system %v, want %v", p.System, tc.sys)
		}
	}
}

func TestReconcile(t *testing.T) {
	keepOwner := func(k string) bool { return strings.EqualFold(k, "k8s-azure-service") }
	for _, tc := range []struct {
		name    string
		tags    map[string]*string
		want    map[string]string
		system  []string
		keep    Keep
		result  string
		changed bool
	}{
		{name: "added to nil", tags: nil, want: map[string]string{"env": "prod"}, result: "env=prod", changed: true},
		{name: "already there", tags: m("env", "prod", "user", "x"), want: map[string]string{"env": "prod"}, result: "env=prod,user=x"},
		{name: "value updated, user tag kept without systemTags", tags: m("env", "dev", "user", "x"), want: map[string]string{"env": "prod"},
			result: "env=prod,user=x", changed: true},
		{name: "key in other case updated in place", tags: m("Env", "dev"), want: map[string]string{"env": "prod"}, result: "Env=prod", changed: true},
		{name: "value case matters", tags: m("env", "Prod"), want: map[string]string{"env": "prod"}, result: "env=prod", changed: true},
		{name: "systemTags: others removed", tags: m("env", "prod", "user", "x", "owner", "me"), want: map[string]string{"env": "prod"},
			system: []string{"OWNER"}, result: "env=prod,owner=me", changed: true},
		{name: "systemTags: kept keys survive", tags: m("k8s-azure-service", "ns/a", "old", "1"), want: map[string]string{},
			system: []string{"owner"}, keep: keepOwner, result: "k8s-azure-service=ns/a", changed: true},
		{name: "systemTags: nothing to do", tags: m("env", "prod", "owner", "me"), want: map[string]string{"env": "prod"},
			system: []string{"owner"}, result: "env=prod,owner=me"},
		{name: "systemTags match by prefix", tags: m("env", "prod", "aks-managed-cluster-name", "c", "AKS-Managed-Pool", "p", "aks", "x"),
			want: map[string]string{"env": "prod"}, system: []string{"aks-managed"}, result: "AKS-Managed-Pool=p,aks-managed-cluster-name=c,env=prod", changed: true},
		{name: "systemTags: a key shorter than the system key is no match", tags: m("owner", "me", "own", "x"), want: map[string]string{},
			system: []string{"owner-team"}, result: "", changed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := Reconcile(tc.tags, tc.want, tc.system, tc.keep)
			if show(got) != tc.result || changed != tc.changed {
				t.Fatalf("got %s (changed %v), want %s (changed %v)", show(got), changed, tc.result, tc.changed)
			}
			if _, again := Reconcile(got, tc.want, tc.system, tc.keep); again {
				t.Fatal("not idempotent")
			}
		})
	}
}

func TestApplyConfig(t *testing.T) {
	// systemTags alone never strips a resource (the existing provider's guard).
	p := Parse("", nil, "owner")
	tags := m("user", "x")
	if got, changed := p.ApplyConfig(tags); changed || show(got) != "user=x" {
		t.Fatalf("systemTags without config tags changed %s", show(got))
	}
	p = Parse("env=prod", nil, "owner")
	if got, changed := p.ApplyConfig(m("user", "x", "owner", "me")); !changed || show(got) != "env=prod,owner=me" {
		t.Fatalf("got %s", show(got))
	}
}

func TestRemove(t *testing.T) {
	p := Parse("team=a", nil, "")
	tags := m("team", "a", "cost", "1", "Owner", "me", "k8s-azure-service", "ns/a")
	keep := func(k string) bool { return k == "k8s-azure-service" }
	if !p.Remove(tags, []string{"COST", "team", "owner", "k8s-azure-service", "absent"}, keep) {
		t.Fatal("nothing removed")
	}
	if show(tags) != "k8s-azure-service=ns/a,team=a" {
		t.Fatalf("left %s", show(tags))
	}
}

func TestEqual(t *testing.T) {
	if !Equal(m("A", "1"), m("a", "1")) || Equal(m("a", "1"), m("a", "2")) || Equal(m("a", "1"), m("a", "1", "b", "2")) {
		t.Fatal("Equal")
	}
}
