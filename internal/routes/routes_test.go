package routes

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/testutil"
	"github.com/azure-ccm/azure-ccm/internal/writer"
)

func TestName(t *testing.T) {
	cases := map[[2]string]string{
		{"node-1", "10.244.0.0/24"}:        "node-1____102440024",
		{"node-1", "fd00:10:244::/64"}:     "node-1____fd001024464",
		{"aks-pool-000001", "10.0.1.0/24"}: "aks-pool-000001____1001024",
	}
	for in, want := range cases {
		got := Name(in[0], in[1])
		if got != want {
			t.Errorf("Name(%v) = %s want %s", in, got, want)
		}
		if NodeOf(got) != in[0] {
			t.Errorf("NodeOf(%s) = %s", got, NodeOf(got))
		}
	}
	if NodeOf("legacy-node") != "legacy-node" {
		t.Error("legacy name")
	}
}

func route(name, cidr, hop string) *armnetwork.Route {
	return &armnetwork.Route{Name: to.Ptr(name), Properties: &armnetwork.RoutePropertiesFormat{
		AddressPrefix: to.Ptr(cidr), NextHopType: to.Ptr(armnetwork.RouteNextHopTypeVirtualAppliance), NextHopIPAddress: to.Ptr(hop)}}
}

func TestApply(t *testing.T) {
	n1v4 := route(Name("n1", "10.244.0.0/24"), "10.244.0.0/24", "10.0.0.4")
	n1v6 := route(Name("n1", "fd00::/64"), "fd00::/64", "fd01::4")
	foreign := route("user-route", "192.168.0.0/16", "10.0.0.100")
	cases := []struct {
		name        string
		current     []*armnetwork.Route
		ops         []Op
		want        []string
		wantChanged bool
	}{
		{"create", nil, []Op{{Node: "n1", CIDR: "10.244.0.0/24", NextHop: "10.0.0.4"}}, []string{"n1____102440024"}, true},
		{"create existing identical is no change", []*armnetwork.Route{n1v4}, []Op{{Node: "n1", CIDR: "10.244.0.0/24", NextHop: "10.0.0.4"}}, []string{"n1____102440024"}, false},
		{"next hop change replaces", []*armnetwork.Route{n1v4}, []Op{{Node: "n1", CIDR: "10.244.0.0/24", NextHop: "10.0.0.9"}}, []string{"n1____102440024"}, true},
		{"dual stack keeps other family", []*armnetwork.Route{n1v4}, []Op{{Node: "n1", CIDR: "fd00::/64", NextHop: "fd01::4"}}, []string{"n1____102440024", "n1____fd0064"}, true},
		{"new CIDR of same family drops stale route", []*armnetwork.Route{n1v4, n1v6}, []Op{{Node: "n1", CIDR: "10.244.9.0/24", NextHop: "10.0.0.4"}}, []string{"n1____102449024", "n1____fd0064"}, true},
		{"delete", []*armnetwork.Route{n1v4, n1v6, foreign}, []Op{{Delete: true, Node: "n1", CIDR: "fd00::/64"}}, []string{"n1____102440024", "user-route"}, true},
		{"delete by listed name and legacy name", []*armnetwork.Route{route("n1", "10.1.0.0/24", "x"), n1v4}, []Op{{Delete: true, Node: "n1", Name: "n1____102440024"}}, nil, true},
		{"delete missing is no change", []*armnetwork.Route{foreign}, []Op{{Delete: true, Node: "n2", CIDR: "10.244.1.0/24"}}, []string{"user-route"}, false},
		{"batch of many nodes", []*armnetwork.Route{foreign}, []Op{
			{Node: "a", CIDR: "10.244.1.0/24", NextHop: "10.0.0.1"}, {Node: "b", CIDR: "10.244.2.0/24", NextHop: "10.0.0.2"},
			{Delete: true, Node: "a", CIDR: "10.244.1.0/24"}}, []string{"b____102442024", "user-route"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := Apply(tc.current, tc.ops)
			names := Names(got)
			if len(names) == 0 {
				names = nil
			}
			if !reflect.DeepEqual(names, tc.want) || changed != tc.wantChanged {
				t.Fatalf("got %v changed=%v, want %v changed=%v", names, changed, tc.want, tc.wantChanged)
			}
		})
	}
}

// fakeStore is an in-memory route table with ETags (a writer.Store).
type fakeStore struct {
	mu       sync.Mutex
	rt       *armnetwork.RouteTable
	version  int
	gets     int
	puts     int
	putGate  chan struct{} // if set, Put waits on it
	conflict int           // Puts to fail with 412 (after bumping the version by someone else)
	ifMatch  []string
}

func (s *fakeStore) Get(context.Context) (*armnetwork.RouteTable, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gets++
	if s.rt == nil {
		return nil, "", nil
	}
	return writer.DeepCopy(s.rt), *s.rt.Etag, nil
}

func (s *fakeStore) Put(_ context.Context, rt *armnetwork.RouteTable, ifMatch string) (*armnetwork.RouteTable, string, error) {
	if s.putGate != nil {
		<-s.putGate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.puts++
	s.ifMatch = append(s.ifMatch, ifMatch)
	if s.conflict > 0 {
		s.conflict--
		// Someone else wrote a route meanwhile.
		s.version++
		s.rt.Etag = to.Ptr(strconv.Itoa(s.version))
		s.rt.Properties.Routes = append(s.rt.Properties.Routes, route("other____1", "10.9.0.0/24", "10.0.0.99"))
		return nil, "", &azcore.ResponseError{StatusCode: http.StatusPreconditionFailed, ErrorCode: "PreconditionFailed"}
	}
	cur := ""
	if s.rt != nil {
		cur = *s.rt.Etag
	}
	if ifMatch != cur {
		return nil, "", &azcore.ResponseError{StatusCode: http.StatusPreconditionFailed}
	}
	s.version++
	stored := writer.DeepCopy(rt)
	stored.Etag = to.Ptr(strconv.Itoa(s.version))
	s.rt = stored
	return writer.DeepCopy(stored), *stored.Etag, nil
}

func (s *fakeStore) Delete(context.Context, string) error {
	return errors.New("route tables are never deleted")
}

func newWriter(store *fakeStore, o writer.Options[armnetwork.RouteTable]) *writer.Writer[armnetwork.RouteTable] {
	if o.CacheTTL == 0 {
		o.CacheTTL = time.Minute
	}
	return writer.New[armnetwork.RouteTable](store, o)
}

func TestChangeCreatesTableAndBatches(t *testing.T) {
	store := &fakeStore{putGate: make(chan struct{})}
	w := newWriter(store, writer.Options[armnetwork.RouteTable]{})
	ctx := context.Background()
	errs := make(chan error, 20)
	submit := func(op Op) {
		_, err := w.Submit(ctx, Change("eastus", op))
		errs <- err
	}
	go submit(Op{Node: "n0", CIDR: "10.244.0.0/24", NextHop: "10.0.0.10"})
	// While the first PUT (the table's creation) is in flight, 10 more changes arrive...
	testutil.WaitFor(t, "the first change's batch to read", func() bool { store.mu.Lock(); defer store.mu.Unlock(); return store.gets == 1 && w.Pending() == 0 })
	for i := 1; i <= 10; i++ {
		go submit(Op{Node: fmt.Sprintf("n%d", i), CIDR: fmt.Sprintf("10.244.%d.0/24", i), NextHop: fmt.Sprintf("10.0.0.%d", 10+i)})
	}
	testutil.WaitFor(t, "10 changes queued", func() bool { return w.Pending() == 10 })
	close(store.putGate)
	for i := 0; i < 11; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// ...and share one PUT: 2 PUTs for 11 changes.
	if store.puts != 2 {
		t.Fatalf("puts = %d, want 2", store.puts)
	}
	if store.ifMatch[0] != "" || store.ifMatch[1] != "1" {
		t.Fatalf("If-Match sequence %v", store.ifMatch)
	}
	if loc := *store.rt.Location; loc != "eastus" {
		t.Fatalf("table created in %q", loc)
	}
	rt, err := w.Peek(ctx)
	if err != nil || len(rt.Properties.Routes) != 11 {
		t.Fatalf("list: %v %v", rt, err)
	}
	// The writer's own PUT refreshed the cache: no GET after the first.
	if store.gets != 1 {
		t.Fatalf("gets = %d", store.gets)
	}
}

func TestChangeRereadsOn412(t *testing.T) {
	store := &fakeStore{rt: &armnetwork.RouteTable{Etag: to.Ptr("0"), Location: to.Ptr("eastus"),
		Properties: &armnetwork.RouteTablePropertiesFormat{}}, conflict: 1}
	w := newWriter(store, writer.Options[armnetwork.RouteTable]{})
	if _, err := w.Submit(context.Background(), Change("eastus", Op{Node: "n1", CIDR: "10.244.1.0/24", NextHop: "10.0.0.1"})); err != nil {
		t.Fatal(err)
	}
	if store.puts != 2 || store.gets != 2 {
		t.Fatalf("puts=%d gets=%d", store.puts, store.gets)
	}
	got := Names(store.rt.Properties.Routes)
	if !reflect.DeepEqual(got, []string{"n1____102441024", "other____1"}) {
		t.Fatalf("the other writer's route was lost or ours not applied: %v", got)
	}
	// No change: no PUT.
	if _, err := w.Submit(context.Background(), Change("eastus", Op{Node: "n1", CIDR: "10.244.1.0/24", NextHop: "10.0.0.1"})); err != nil {
		t.Fatal(err)
	}
	if store.puts != 2 {
		t.Fatalf("no-op batch wrote: %d", store.puts)
	}
}
