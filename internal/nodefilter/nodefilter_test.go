package nodefilter

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in, want, err string
	}{
		{in: ""},
		{in: "env=prod", want: "env=prod"},
		{in: "env==prod, batch!=3", want: "batch!=3,env==prod"},
		{in: "!maintenance", want: "!maintenance"},
		{in: "env in (prod,staging),!maintenance", want: "env in (prod,staging),!maintenance"},
		{in: "env in (prod", err: `--node-filter-requirements "env in (prod"`},
		{in: "a=b=c", err: "node-filter-requirements"},
	} {
		sel, err := Parse(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Parse(%q) err = %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if got := String(sel); got != c.want {
			t.Errorf("Parse(%q) = %q, want %q", c.in, got, c.want)
		}
		if c.want == "" && sel != nil {
			t.Errorf("Parse(%q) = %v, want nil (every node)", c.in, sel)
		}
	}
}

func node(name string, l map[string]string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
}

func TestInstallFiltersOnlyNodes(t *testing.T) {
	client := fake.NewClientset(
		node("prod-1", map[string]string{"env": "prod"}),
		node("prod-2", map[string]string{"env": "prod", "maintenance": "true"}),
		node("test-1", map[string]string{"env": "test"}),
		&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "unlabelled"}},
	)
	sel, err := Parse("env=prod,!maintenance")
	if err != nil {
		t.Fatal(err)
	}
	f := informers.NewSharedInformerFactory(client, 0)
	if err := Install(f, sel); err != nil {
		t.Fatal(err)
	}
	nodes, svcs := f.Core().V1().Nodes(), f.Core().V1().Services()
	nodes.Informer()
	svcs.Informer()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	f.Start(ctx.Done())
	defer func() { cancel(); f.Shutdown() }()
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("%v did not sync", typ)
		}
	}
	got, err := nodes.Lister().List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "prod-1" {
		var names []string
		for _, n := range got {
			names = append(names, n.Name)
		}
		t.Errorf("nodes seen %v, want [prod-1]", names)
	}
	// The selector is for nodes: a Service without those labels is still seen.
	if s, err := svcs.Lister().List(labels.Everything()); err != nil || len(s) != 1 {
		t.Errorf("services seen %d (%v), want 1", len(s), err)
	}
}

func TestInstallRefusesAnExistingInformer(t *testing.T) {
	f := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	f.Core().V1().Nodes().Informer()
	sel, _ := Parse("env=prod")
	if err := Install(f, sel); err == nil {
		t.Fatal("Install on a factory whose node informer exists succeeded")
	}
	if err := Install(informers.NewSharedInformerFactory(fake.NewClientset(), 0), nil); err != nil {
		t.Fatalf("nil selector: %v", err)
	}
}
