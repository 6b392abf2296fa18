package nodeipam

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/azure-ccm/azure-ccm/internal/controllers/nodeipam/ipam"
	"github.com/azure-ccm/azure-ccm/internal/testutil"
)

func node(name, uid string, cidrs ...string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid)}}
	if len(cidrs) > 0 {
		n.Spec.PodCIDR, n.Spec.PodCIDRs = cidrs[0], cidrs
	}
	return n
}

// apiServerRules makes the fake client refuse what the API server refuses: a patch naming
// another uid, and a change of pod CIDRs once set. fail, when set, decides per patch whether
// to fail it before (false) or after (true) applying it.
type apiServerRules struct {
	mu      sync.Mutex
	patches int
	fail    func(n int) (fail, after bool)
}

func (r *apiServerRules) install(t *testing.T, kube *fake.Clientset) {
	kube.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchAction)
		var body struct {
			Metadata struct{ UID string }
			Spec     struct{ PodCIDRs []string }
		}
		if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
			t.Errorf("patch body: %v", err)
		}
		obj, err := kube.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, "", p.GetName())
		if err != nil {
			return true, nil, err
		}
		cur := obj.(*v1.Node)
		invalid := func(msg string) error {
			return apierrors.NewInvalid(schema.GroupKind{Kind: "Node"}, p.GetName(), field.ErrorList{field.Forbidden(field.NewPath("spec"), msg)})
		}
		if body.Metadata.UID != "" && body.Metadata.UID != string(cur.UID) {
			return true, nil, invalid("uid is immutable")
		}
		if len(cur.Spec.PodCIDRs) > 0 && !slices.Equal(cur.Spec.PodCIDRs, body.Spec.PodCIDRs) {
			return true, nil, invalid("node updates may not change podCIDR except from \"\" to valid")
		}
		r.mu.Lock()
		r.patches++
		n := r.patches
		r.mu.Unlock()
		if r.fail != nil {
			if fail, after := r.fail(n); fail {
				if after {
					cur = cur.DeepCopy()
					cur.Spec.PodCIDRs, cur.Spec.PodCIDR = body.Spec.PodCIDRs, body.Spec.PodCIDRs[0]
					if err := kube.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, cur, ""); err != nil {
						t.Error(err)
					}
				}
				return true, nil, apierrors.NewTimeoutError("injected", 1)
			}
		}
		return false, nil, nil
	})
}

type harness struct {
	t    *testing.T
	kube *fake.Clientset
	c    *Controller
	rec  *record.FakeRecorder
	// knownDup is a CIDR the test itself gave to two nodes.
	knownDup string
}

func start(t *testing.T, cluster string, rules *apiServerRules, objs ...runtime.Object) *harness {
	t.Helper()
	kube := fake.NewClientset(objs...)
	if rules == nil {
		rules = &apiServerRules{}
	}
	rules.install(t, kube)
	specs, _, err := ipam.Plan(ipam.Flags{ClusterCIDR: cluster, MaskSizeIPv4: 30, MaskSizeIPv6: 64})
	if err != nil {
		t.Fatal(err)
	}
	f := informers.NewSharedInformerFactory(kube, 0)
	rec := record.NewFakeRecorder(1000)
	c, err := New(Options{Kube: kube, Nodes: f.Core().V1().Nodes(), Recorder: rec, Specs: specs,
		RetryBase: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f.Start(ctx.Done())
	go c.Run(ctx)
	return &harness{t: t, kube: kube, c: c, rec: rec}
}

// cidrs waits until every named node has pod CIDRs and returns them; it fails on a duplicate.
func (h *harness) cidrs(names ...string) map[string][]string {
	h.t.Helper()
	var out map[string][]string
	testutil.Eventually(h.t, fmt.Sprintf("pod CIDRs of %v", names), func() error {
		out = map[string][]string{}
		list, err := h.kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		owner := map[string]string{}
		for _, n := range list.Items {
			for _, c := range n.Spec.PodCIDRs {
				if o, dup := owner[c]; dup && c != h.knownDup {
					h.t.Fatalf("%s given to %s and %s", c, o, n.Name)
				}
				owner[c] = n.Name
			}
			out[n.Name] = n.Spec.PodCIDRs
		}
		for _, name := range names {
			if len(out[name]) == 0 {
				return fmt.Errorf("node %s has no pod CIDR (have %v)", name, out)
			}
		}
		return nil
	})
	return out
}

func (h *harness) create(n *v1.Node) {
	h.t.Helper()
	if _, err := h.kube.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) delete(name string) {
	h.t.Helper()
	if err := h.kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) waitEvent(substr string) {
	h.t.Helper()
	deadline := time.After(time.Minute)
	var seen []string
	for {
		select {
		case e := <-h.rec.Events:
			seen = append(seen, e)
			if strings.Contains(e, substr) {
				return
			}
		case <-deadline:
			h.t.Fatalf("no event %q (saw %q)", substr, seen)
		}
	}
}

func TestExistingCIDRsAreNeverHandedOut(t *testing.T) {
	// 10.0.0.0/28 in /30s: four subnets, two held before the controller starts.
	h := start(t, "10.0.0.0/28", nil, node("a", "1", "10.0.0.0/30"), node("b", "2", "10.0.0.8/30"), node("c", "3"), node("d", "4"))
	got := h.cidrs("a", "b", "c", "d")
	if got["a"][0] != "10.0.0.0/30" || got["b"][0] != "10.0.0.8/30" {
		t.Fatalf("existing CIDRs changed: %v", got)
	}
	h.waitEvent("PodCIDRAssigned")
}

func TestDeletedNodesCIDRIsReusedWhenFull(t *testing.T) {
	h := start(t, "10.0.0.0/29", nil, node("a", "1"), node("b", "2"))
	first := h.cidrs("a", "b")
	h.create(node("c", "3"))
	h.waitEvent("CIDRNotAvailable")
	h.delete("a")
	got := h.cidrs("b", "c")
	if got["c"][0] != first["a"][0] {
		t.Fatalf("c got %v, want a's freed %v", got["c"], first["a"])
	}
}

func TestDualStack(t *testing.T) {
	h := start(t, "10.0.0.0/28,fd00:10::/56", nil, node("a", "1", "10.0.0.0/30", "fd00:10::/64"), node("b", "2"))
	got := h.cidrs("a", "b")
	if !slices.Equal(got["b"], []string{"10.0.0.4/30", "fd00:10:0:1::/64"}) {
		t.Fatalf("b got %v", got["b"])
	}
}

// A write that landed but reported an error (a timeout) must not free the CIDR: the node keeps
// it and nobody else gets it.
func TestUnknownWriteOutcomeKeepsTheCIDR(t *testing.T) {
	rules := &apiServerRules{fail: func(n int) (bool, bool) { return n == 1, true }}
	h := start(t, "10.0.0.0/29", rules, node("a", "1"))
	got := h.cidrs("a")
	h.create(node("b", "2"))
	got2 := h.cidrs("a", "b")
	if got2["a"][0] != got["a"][0] || got2["b"][0] == got["a"][0] {
		t.Fatalf("after an unknown outcome: %v then %v", got, got2)
	}
}

// A write that failed is retried with the same CIDRs.
func TestFailedWriteIsRetriedWithTheSameCIDR(t *testing.T) {
	rules := &apiServerRules{fail: func(n int) (bool, bool) { return n <= 2, false }}
	h := start(t, "10.0.0.0/28", rules, node("a", "1"))
	got := h.cidrs("a")
	if got["a"][0] != "10.0.0.0/30" {
		t.Fatalf("a got %v after retries, want the first choice 10.0.0.0/30", got["a"])
	}
	h.waitEvent("CIDRAssignmentFailed")
}

// Another writer set the node's CIDR first: the controller's choice is released.
func TestSomeoneElseWroteFirst(t *testing.T) {
	h := start(t, "10.0.0.0/29", nil)
	// Write the CIDR in the tracker only, so the controller still sees an empty node in its
	// cache when it decides, then its patch is refused.
	n := node("a", "1")
	h.c.mu.Lock() // hold the controller until the object is in place
	h.create(n)
	cur, _ := h.kube.CoreV1().Nodes().Get(context.Background(), "a", metav1.GetOptions{})
	cur.Spec.PodCIDRs, cur.Spec.PodCIDR = []string{"10.0.0.4/30"}, "10.0.0.4/30"
	if err := h.kube.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, cur, ""); err != nil {
		t.Fatal(err)
	}
	h.c.mu.Unlock()
	got := h.cidrs("a")
	if got["a"][0] != "10.0.0.4/30" {
		t.Fatalf("a: %v", got["a"])
	}
	h.create(node("b", "2"))
	got = h.cidrs("a", "b")
	if got["b"][0] != "10.0.0.0/30" {
		t.Fatalf("b: %v (the controller's first choice for a must have been released)", got["b"])
	}
}

func TestConflictAndUnusableAreReported(t *testing.T) {
	h := start(t, "10.0.0.0/28", nil, node("a", "1", "10.0.0.0/30"), node("b", "2", "10.0.0.0/30"), node("c", "3", "192.168.0.0/24"))
	h.knownDup = "10.0.0.0/30"
	h.waitEvent("PodCIDRConflict")
	h.create(node("d", "4"))
	h.cidrs("d")
	h.delete("a")
	h.create(node("e", "5"))
	got := h.cidrs("e")
	if got["e"][0] == "10.0.0.0/30" {
		t.Fatal("a CIDR b still holds was handed out after a went")
	}
}

func TestCIDROutsideTheClusterCIDRIsReported(t *testing.T) {
	h := start(t, "10.0.0.0/28", nil, node("c", "3", "192.168.0.0/24"))
	h.waitEvent("PodCIDRNotInClusterCIDR")
}

func TestPlanErrorsStopTheController(t *testing.T) {
	if _, _, err := ipam.Plan(ipam.Flags{ClusterCIDR: "10.0.0.0/16", AllocatorType: "CloudAllocator"}); err == nil {
		t.Fatal("CloudAllocator accepted")
	}
	if _, err := New(Options{}); err == nil {
		t.Fatal("New without clients accepted")
	}
}

// Many nodes at once: every one gets a distinct CIDR, and netip arithmetic matches the count.
func TestManyNodes(t *testing.T) {
	var objs []runtime.Object
	var names []string
	for i := 0; i < 200; i++ {
		name := fmt.Sprintf("n%03d", i)
		objs = append(objs, node(name, fmt.Sprint(i)))
		names = append(names, name)
	}
	h := start(t, "10.0.0.0/20", nil, objs...) // 1024 /30s
	got := h.cidrs(names...)
	seen := map[netip.Prefix]bool{}
	for _, c := range got {
		p := netip.MustParsePrefix(c[0])
		if seen[p] || p.Bits() != 30 || !netip.MustParsePrefix("10.0.0.0/20").Contains(p.Addr()) {
			t.Fatalf("bad or duplicate %s", p)
		}
		seen[p] = true
	}
}
