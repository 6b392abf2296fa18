package dryrun

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/internal/changes"
	"github.com/azure-ccm/azure-ccm/internal/writer"
	"github.com/azure-ccm/azure-ccm/internal/writers"
)

const (
	lbID  = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/kubernetes"
	pipID = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/publicIPAddresses/kubernetes-a1"
)

// azure is a fake Azure store: it counts calls, and a write fails the test.
type azure[T any] struct {
	t    *testing.T
	mu   sync.Mutex
	obj  *T
	gets int
}

func (a *azure[T]) Get(context.Context) (*T, string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.gets++
	if a.obj == nil {
		return nil, "", nil
	}
	return writer.DeepCopy(a.obj), "etag-1", nil
}

func (a *azure[T]) Put(context.Context, *T, string) (*T, string, error) {
	a.t.Error("the dry run wrote to Azure")
	return nil, "", errors.New("no writes")
}

func (a *azure[T]) Delete(context.Context, string) error {
	a.t.Error("the dry run deleted in Azure")
	return errors.New("no deletes")
}

func realSet[T any](t *testing.T, lb *azure[armnetwork.LoadBalancer], pip *azure[armnetwork.PublicIPAddress]) *writers.Set {
	opts := writer.Options[armnetwork.LoadBalancer]{CacheTTL: time.Minute}
	return &writers.Set{
		LoadBalancers: writer.NewRegistry(func(string) writer.Store[armnetwork.LoadBalancer] { return lb }, opts),
		PublicIPs: writer.NewRegistry(func(string) writer.Store[armnetwork.PublicIPAddress] { return pip },
			writer.Options[armnetwork.PublicIPAddress]{CacheTTL: time.Minute}),
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func pool(name string, members ...string) *armnetwork.BackendAddressPool {
	// Every child read from ARM carries its ID.
	p := &armnetwork.BackendAddressPool{ID: to.Ptr(lbID + "/backendAddressPools/" + name), Name: to.Ptr(name),
		Properties: &armnetwork.BackendAddressPoolPropertiesFormat{}}
	for _, m := range members {
		p.Properties.LoadBalancerBackendAddresses = append(p.Properties.LoadBalancerBackendAddresses,
			&armnetwork.LoadBalancerBackendAddress{Name: to.Ptr(m), Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{IPAddress: to.Ptr("10.0.0.1")}})
	}
	return p
}

func TestDryRunRecordsInsteadOfWriting(t *testing.T) {
	lbAz := &azure[armnetwork.LoadBalancer]{t: t, obj: &armnetwork.LoadBalancer{ID: to.Ptr(lbID), Name: to.Ptr("kubernetes"),
		Properties: &armnetwork.LoadBalancerPropertiesFormat{BackendAddressPools: []*armnetwork.BackendAddressPool{pool("kubernetes", "n1")}}}}
	pipAz := &azure[armnetwork.PublicIPAddress]{t: t}
	live := realSet[armnetwork.LoadBalancer](t, lbAz, pipAz)
	rec := NewRecorder()
	set := NewSet(live, rec)

	// A read goes through the real writer (and its cache: a second read costs no GET).
	for range 2 {
		if _, err := set.LoadBalancers.For(lbID).Get(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	if lbAz.gets != 1 {
		t.Errorf("Azure was read %d times, want 1 (through the real writer's cache)", lbAz.gets)
	}

	// A public IP created: recorded with a placeholder address and its ID.
	rec.SetActor("service default/web")
	stored, err := set.PublicIPs.For(pipID).Submit(ctx(t), func(cur *armnetwork.PublicIPAddress) (*armnetwork.PublicIPAddress, error) {
		return &armnetwork.PublicIPAddress{Location: to.Ptr("eastus")}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if stored.ID == nil || *stored.ID != pipID || stored.Properties.IPAddress == nil {
		t.Fatalf("created public IP = %+v, want its ID and an address", stored)
	}
	addr := *stored.Properties.IPAddress
	if d, ok := rec.Placeholder(addr); !ok || d != "address of new public IP kubernetes-a1" {
		t.Errorf("Placeholder(%s) = %q, %v", addr, d, ok)
	}
	if _, ok := rec.Placeholder("203.0.113.1"); ok {
		t.Error("a real address is not a placeholder")
	}

	// A frontend added to the load balancer, then a pool-only change: the planned state carries
	// the first write into the second.
	_, err = set.LoadBalancers.For(lbID).Submit(ctx(t), func(cur *armnetwork.LoadBalancer) (*armnetwork.LoadBalancer, error) {
		cur.Properties.FrontendIPConfigurations = append(cur.Properties.FrontendIPConfigurations, &armnetwork.FrontendIPConfiguration{
			Name: to.Ptr("a1"), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{PublicIPAddress: &armnetwork.PublicIPAddress{ID: to.Ptr(pipID)}}})
		return cur, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rec.SetActor("node n2")
	after, err := set.LoadBalancers.For(lbID).SubmitChild(ctx(t), "kubernetes", func(cur *armnetwork.LoadBalancer) (*armnetwork.LoadBalancer, error) {
		if len(cur.Properties.FrontendIPConfigurations) != 1 {
			t.Errorf("the second write does not see the first: %d frontends", len(cur.Properties.FrontendIPConfigurations))
		}
		cur.Properties.BackendAddressPools[0].Properties = pool("kubernetes", "n1", "n2").Properties
		return cur, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if after == nil || len(after.Properties.FrontendIPConfigurations) != 1 {
		t.Fatalf("pool write returned %+v", after)
	}
	// Nothing changes: nothing recorded.
	if _, err := set.LoadBalancers.For(lbID).Submit(ctx(t), func(cur *armnetwork.LoadBalancer) (*armnetwork.LoadBalancer, error) { return cur, nil }); err != nil {
		t.Fatal(err)
	}
	// The load balancer deleted.
	if _, err := set.LoadBalancers.For(lbID).Submit(ctx(t), func(*armnetwork.LoadBalancer) (*armnetwork.LoadBalancer, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if got, err := set.LoadBalancers.For(lbID).Get(ctx(t)); err != nil || got != nil {
		t.Errorf("after the planned deletion Get = %v, %v; want nothing", got, err)
	}

	ws := rec.Writes()
	type w struct {
		typ   string
		op    Op
		child string
		actor string
		chs   []string
	}
	var got []w
	for _, x := range ws {
		var chs []string
		for _, c := range x.Changes {
			if c.Collection != "" {
				chs = append(chs, changes.Describe(c))
			}
		}
		got = append(got, w{x.ResourceType, x.Op, x.Child, x.Actor, chs})
	}
	want := []w{
		{TypePublicIP, Create, "", "service default/web", nil},
		{TypeLoadBalancer, Update, "", "service default/web", []string{"frontendIPConfigurations a1 added"}},
		{TypeLoadBalancer, Update, "kubernetes", "node n2", []string{"backendAddressPools kubernetes changed (properties.loadBalancerBackendAddresses[n2] = added)"}},
		{TypeLoadBalancer, Delete, "", "node n2", nil},
	}
	if len(got) != len(want) {
		t.Fatalf("writes = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].typ != want[i].typ || got[i].op != want[i].op || got[i].child != want[i].child || got[i].actor != want[i].actor ||
			len(got[i].chs) != len(want[i].chs) || (len(want[i].chs) > 0 && got[i].chs[0] != want[i].chs[0]) {
			t.Errorf("write %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if ws[1].Name() != "kubernetes" {
		t.Errorf("Name() = %s", ws[1].Name())
	}

	// Reset: a new dry run sees Azure again.
	rec.Reset()
	if got, err := set.LoadBalancers.For(lbID).Get(ctx(t)); err != nil || got == nil || len(got.Properties.FrontendIPConfigurations) != 0 {
		t.Errorf("after Reset Get = %+v, %v; want Azure's load balancer", got, err)
	}
	if len(rec.Writes()) != 0 {
		t.Error("Reset kept writes")
	}
}

func TestDryRunPrivateFrontendPlaceholder(t *testing.T) {
	lbAz := &azure[armnetwork.LoadBalancer]{t: t}
	rec := NewRecorder()
	set := NewSet(realSet[armnetwork.LoadBalancer](t, lbAz, &azure[armnetwork.PublicIPAddress]{t: t}), rec)
	stored, err := set.LoadBalancers.For(lbID+"-internal").Submit(ctx(t), func(*armnetwork.LoadBalancer) (*armnetwork.LoadBalancer, error) {
		return &armnetwork.LoadBalancer{Properties: &armnetwork.LoadBalancerPropertiesFormat{FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{
			{Name: to.Ptr("a1"), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{Subnet: &armnetwork.Subnet{ID: to.Ptr("subnet")}}},
			{Name: to.Ptr("a1-IPv6"), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{Subnet: &armnetwork.Subnet{ID: to.Ptr("subnet")},
				PrivateIPAddressVersion: to.Ptr(armnetwork.IPVersionIPv6)}},
			{Name: to.Ptr("static"), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{Subnet: &armnetwork.Subnet{ID: to.Ptr("subnet")},
				PrivateIPAddress: to.Ptr("10.240.0.9")}},
		}}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	fes := stored.Properties.FrontendIPConfigurations
	if a := *fes[0].Properties.PrivateIPAddress; a != "240.0.0.1" {
		t.Errorf("IPv4 placeholder = %s", a)
	}
	if a := *fes[1].Properties.PrivateIPAddress; a != "100::1" {
		t.Errorf("IPv6 placeholder = %s", a)
	}
	if a := *fes[2].Properties.PrivateIPAddress; a != "10.240.0.9" {
		t.Errorf("a static address was replaced by %s", a)
	}
	if fes[0].ID == nil || *fes[0].ID != lbID+"-internal/frontendIPConfigurations/a1" {
		t.Errorf("frontend ID = %v", fes[0].ID)
	}
	if w := rec.Writes(); len(w) != 1 || w[0].Op != Create {
		t.Errorf("writes = %+v, want one create", w)
	}
}

type fakeLists struct {
	items map[string][]*armnetwork.PublicIPAddress
	calls int
}

func (f *fakeLists) Get(_ context.Context, rg string) ([]*armnetwork.PublicIPAddress, error) {
	f.calls++
	return f.items[rg], nil
}
func (f *fakeLists) Refresh(ctx context.Context, rg string) ([]*armnetwork.PublicIPAddress, error) {
	return f.Get(ctx, rg)
}
func (f *fakeLists) Invalidate(string) { panic("the dry run dropped the real list") }

func (f *fakeLists) ExternalChanges(string) uint64 { return 0 }

func (f *fakeLists) Writing(string, string) func() { return func() {} }
func (f *fakeLists) Update(string, func([]*armnetwork.PublicIPAddress) []*armnetwork.PublicIPAddress) {
	panic("the dry run edited the real list")
}

func TestDryRunPublicIPList(t *testing.T) {
	live := &fakeLists{items: map[string][]*armnetwork.PublicIPAddress{"rg": {{Name: to.Ptr("old")}}}}
	rec := NewRecorder()
	l := rec.PublicIPs(live)
	l.Update("RG", func(items []*armnetwork.PublicIPAddress) []*armnetwork.PublicIPAddress {
		return append(items, &armnetwork.PublicIPAddress{Name: to.Ptr("new")})
	})
	l.Invalidate("rg")
	got, err := l.Get(context.Background(), "rg")
	if err != nil || len(got) != 2 || *got[1].Name != "new" {
		t.Fatalf("Get = %v, %v; want the real list plus the planned IP", got, err)
	}
	if len(live.items["rg"]) != 1 {
		t.Error("the real list was changed")
	}
	rec.Reset()
	if got, _ := l.Refresh(context.Background(), "rg"); len(got) != 1 {
		t.Errorf("after Reset: %d IPs, want the real list", len(got))
	}
}

func TestEventRecorder(t *testing.T) {
	rec := NewRecorder()
	rec.SetActor("service default/web")
	e := rec.EventRecorder()
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}}
	e.Eventf(svc, v1.EventTypeWarning, "InvalidAnnotation", "bad %s", "value")
	Discard{}.Event(svc, v1.EventTypeWarning, "X", "dropped")
	got := rec.Events()
	want := Event{Actor: "service default/web", Kind: "Service", Namespace: "default", Name: "web", Type: "Warning", Reason: "InvalidAnnotation", Message: "bad value"}
	if len(got) != 1 || got[0] != want {
		t.Errorf("events = %+v, want %+v", got, want)
	}
}

// A private link service's deletion names the private endpoint connections it takes with it.
func TestDryRunPrivateLinkDeletionNamesConnections(t *testing.T) {
	const plsID = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/privateLinkServices/pls-a1"
	const peID = "/subscriptions/c/resourceGroups/consumer/providers/Microsoft.Network/privateEndpoints/pe-1"
	conn := func(name, pe, status string) *armnetwork.PrivateEndpointConnection {
		c := &armnetwork.PrivateEndpointConnection{Name: to.Ptr(name), Properties: &armnetwork.PrivateEndpointConnectionProperties{
			PrivateLinkServiceConnectionState: &armnetwork.PrivateLinkServiceConnectionState{Status: to.Ptr(status)}}}
		if pe != "" {
			c.Properties.PrivateEndpoint = &armnetwork.PrivateEndpoint{ID: to.Ptr(pe)}
		}
		return c
	}
	plsAz := &azure[armnetwork.PrivateLinkService]{t: t, obj: &armnetwork.PrivateLinkService{ID: to.Ptr(plsID), Name: to.Ptr("pls-a1"),
		Properties: &armnetwork.PrivateLinkServiceProperties{PrivateEndpointConnections: []*armnetwork.PrivateEndpointConnection{
			conn("pe-1.conn", peID, "Approved"), conn("pe-2.conn", "", "Pending"), nil}}}}
	live := &writers.Set{PrivateLinkServices: writer.NewRegistry(func(string) writer.Store[armnetwork.PrivateLinkService] { return plsAz },
		writer.Options[armnetwork.PrivateLinkService]{})}
	rec := NewRecorder()
	set := NewSet(live, rec)
	if _, err := set.PrivateLinkServices.For(plsID).Submit(ctx(t), func(*armnetwork.PrivateLinkService) (*armnetwork.PrivateLinkService, error) {
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	ws := rec.Writes()
	if len(ws) != 1 || ws[0].Op != Delete {
		t.Fatalf("writes %+v, want one deletion", ws)
	}
	want := []Dependent{
		{Kind: "private endpoint connection", Name: "pe-1.conn", Target: peID, State: "Approved"},
		{Kind: "private endpoint connection", Name: "pe-2.conn", State: "Pending"},
	}
	if got := ws[0].Removes; len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("Removes = %+v, want %+v", got, want)
	}
}
