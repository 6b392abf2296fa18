package localpools

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/multislb"
	"github.com/azure-ccm/azure-ccm/internal/testutil"
)

// fakeLB records the endpoint nodes it sees at each sync (through the endpoint lookup the
// placer is built with) and fails the first failures calls.
type fakeLB struct {
	mu       sync.Mutex
	f        multislb.EndpointNodesFunc
	failures int
	calls    int
	seen     [][]string
}

func (f *fakeLB) SyncLocalPool(_ context.Context, _ string, svc *v1.Service, _ []*v1.Node) (multislb.LocalPoolResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.calls <= f.failures {
		return "", errors.New("injected ARM failure")
	}
	nodes, ok := f.f(svc.Namespace, svc.Name)
	if !ok {
		return "", errors.New("endpoint lookup used before sync")
	}
	f.seen = append(f.seen, nodes)
	return multislb.LocalPoolUpdated, nil
}

func (f *fakeLB) snapshot() (int, [][]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls, append([][]string(nil), f.seen...)
}

func slice(name, svc string, nodes ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name,
		Labels: map[string]string{discoveryv1.LabelServiceName: svc}}}
	for _, n := range nodes {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{NodeName: &n})
	}
	return s
}

type fixture struct {
	u      *Updater
	lb     *fakeLB
	slices cache.Indexer
	synced *bool
	mu     *sync.Mutex
	rec    *record.FakeRecorder
}

func newFixture(t *testing.T, failures int) fixture {
	t.Helper()
	svcs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	sl := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	_ = svcs.Add(&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal}})
	_ = svcs.Add(&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cluster"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyCluster}})
	synced, mu := new(bool), &sync.Mutex{}
	hasSynced := func() bool { mu.Lock(); defer mu.Unlock(); return *synced }
	lb := &fakeLB{failures: failures, f: EndpointNodes(discoverylisters.NewEndpointSliceLister(sl), hasSynced)}
	rec := record.NewFakeRecorder(100)
	u, err := New(Options{ClusterName: "kubernetes", LB: lb, Services: corelisters.NewServiceLister(svcs),
		Nodes: corelisters.NewNodeLister(nodes), HasSynced: []cache.InformerSynced{hasSynced},
		Recorder: rec, Interval: 50 * time.Millisecond, RetryBase: 20 * time.Millisecond, RetryMax: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return fixture{u: u, lb: lb, slices: sl, synced: synced, mu: mu, rec: rec}
}

func TestUpdaterWaitsForSyncThenFlushesFullSet(t *testing.T) {
	fx := newFixture(t, 0)
	h := fx.u.SliceHandler()
	// Churn before sync and between flushes: many events, one write per flush.
	for _, s := range []*discoveryv1.EndpointSlice{slice("web-1", "web", "n1"), slice("web-2", "web", "n2", "n3")} {
		_ = fx.slices.Add(s)
		h.OnAdd(s, false)
	}
	h.OnAdd(slice("c-1", "cluster", "n9"), false) // a Cluster service: ignored
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go fx.u.Run(ctx)
	// Unsynced: the endpoint lookup says "unknown" and nothing is flushed.
	if _, ok := fx.lb.f("default", "web"); ok {
		t.Fatal("endpoint lookup answered before the informers synced")
	}
	if calls, _ := fx.lb.snapshot(); calls != 0 {
		t.Fatalf("%d syncs before the informers synced", calls)
	}
	fx.mu.Lock()
	*fx.synced = true
	fx.mu.Unlock()
	testutil.WaitFor(t, "first flush", func() bool { c, _ := fx.lb.snapshot(); return c >= 1 })
	_, seen := fx.lb.snapshot()
	if !reflect.DeepEqual(seen[0], []string{"n1", "n2", "n3"}) {
		t.Fatalf("first flush saw %v", seen[0])
	}
	// Scale down: one slice goes; the next flush writes the full remaining set.
	_ = fx.slices.Delete(slice("web-2", "web"))
	h.OnDelete(slice("web-2", "web"))
	testutil.WaitFor(t, "second flush", func() bool { c, _ := fx.lb.snapshot(); return c >= 2 })
	_, seen = fx.lb.snapshot()
	if !reflect.DeepEqual(seen[1], []string{"n1"}) {
		t.Fatalf("second flush saw %v", seen[1])
	}
	if calls, _ := fx.lb.snapshot(); calls != 2 {
		t.Fatalf("%d syncs, want 2 (the Cluster service must not be synced)", calls)
	}
}

func TestUpdaterRetriesFailedFlush(t *testing.T) {
	fx := newFixture(t, 2)
	*fx.synced = true
	_ = fx.slices.Add(slice("web-1", "web", "n1"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go fx.u.Run(ctx)
	testutil.WaitFor(t, "a successful flush after two failures", func() bool { _, s := fx.lb.snapshot(); return len(s) == 1 })
	calls, seen := fx.lb.snapshot()
	if calls != 3 || !reflect.DeepEqual(seen[0], []string{"n1"}) {
		t.Fatalf("calls %d, seen %v", calls, seen)
	}
	var failed, updated int
	for len(fx.rec.Events) > 0 {
		switch ev := <-fx.rec.Events; {
		case strings.Contains(ev, ReasonPoolUpdateFailed):
			failed++
		case strings.Contains(ev, ReasonPoolUpdated):
			updated++
		}
	}
	if failed != 2 || updated != 1 {
		t.Fatalf("events: %d failed, %d updated", failed, updated)
	}
}
