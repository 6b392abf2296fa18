package plan

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
)

const (
	plsFrontend = ilbID + "/frontendIPConfigurations/" + svcA
	natSubnet   = "/subscriptions/" + sub + "/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/vnet/subnets/pls-subnet"
)

func managedPLS(name, owner string, frontends ...string) *armnetwork.PrivateLinkService {
	p := &armnetwork.PrivateLinkService{Name: to.Ptr(name), Tags: map[string]*string{TagPLSCluster: to.Ptr("kubernetes"), TagPLSOwner: to.Ptr(owner)},
		Properties: &armnetwork.PrivateLinkServiceProperties{}}
	for _, f := range frontends {
		p.Properties.LoadBalancerFrontendIPConfigurations = append(p.Properties.LoadBalancerFrontendIPConfigurations, &armnetwork.FrontendIPConfiguration{ID: to.Ptr(f)})
	}
	return p
}

func TestPrivateLinkNamesAndPlaces(t *testing.T) {
	cfg := &config.Config{ResourceGroup: "rg", SubnetName: "nodes", PrivateLinkServiceResourceGroup: "pls-rg"}
	for _, tc := range []struct {
		name                string
		opts                []svcOpt
		plsName, rg, subnet string
	}{
		{"defaults", nil, "pls-" + svcA, "pls-rg", "nodes"},
		{"annotations", []svcOpt{withAnn(annotations.Internal, "true"), withAnn(annotations.PLSCreate, "true"), withAnn(annotations.PLSName, "mine"),
			withAnn(annotations.PLSResourceGroup, "other-rg"), withAnn(annotations.PLSSubnet, "pls-subnet")}, "mine", "other-rg", "pls-subnet"},
		{"internal subnet of an internal service", []svcOpt{withAnn(annotations.Internal, "true"), withAnn(annotations.InternalSubnet, "ilb")},
			"pls-" + svcA, "pls-rg", "ilb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mkService(t, uidA, "a", tc.opts...)
			if got := PrivateLinkName(s.Opts.PLS, svcA); got != tc.plsName {
				t.Errorf("name %q, want %q", got, tc.plsName)
			}
			if got := PrivateLinkResourceGroup(cfg, s); got != tc.rg {
				t.Errorf("resource group %q, want %q", got, tc.rg)
			}
			if got := PrivateLinkSubnet(cfg, s); got != tc.subnet {
				t.Errorf("subnet %q, want %q", got, tc.subnet)
			}
		})
	}
}

func TestPrivateLinkLookups(t *testing.T) {
	mine := managedPLS("pls-a", "ns/a", plsFrontend)
	other := managedPLS("pls-x", "ns/x", lbID+"/frontendIPConfigurations/x")
	list := []*armnetwork.PrivateLinkService{nil, {Name: to.Ptr("no-props")}, other, mine}
	if got := PrivateLinkOf(list, strings.ToUpper(plsFrontend)); got != mine {
		t.Errorf("PrivateLinkOf = %v", got)
	}
	if PrivateLinkOf(list, ilbID+"/frontendIPConfigurations/none") != nil {
		t.Error("a frontend without PLS has one")
	}
	if got := PrivateLinksOn(list, ilbID); len(got) != 1 || got[0] != mine {
		t.Errorf("PrivateLinksOn(internal) = %v", got)
	}
	if got := PrivateLinksOn(list, lbID); len(got) != 1 || got[0] != other {
		t.Errorf("PrivateLinksOn(public) = %v", got)
	}
	before := lbWith(map[string]string{"keep": "10.0.0.4", "go": "10.0.0.5"}, nil)
	for _, fe := range before.Properties.FrontendIPConfigurations {
		fe.ID = to.Ptr(ilbID + "/frontendIPConfigurations/" + *fe.Name)
	}
	after := lbWith(map[string]string{"keep": "10.0.0.4"}, nil)
	if got := RemovedFrontendIDs(before, after); fmt.Sprint(got) != "["+ilbID+"/frontendIPConfigurations/go]" {
		t.Errorf("RemovedFrontendIDs = %v", got)
	}
	if got := RemovedFrontendIDs(before, nil); len(got) != 2 {
		t.Errorf("a deleted load balancer removes every frontend: %v", got)
	}
}

func TestPrivateLinkFrontend(t *testing.T) {
	lb := &armnetwork.LoadBalancer{Properties: &armnetwork.LoadBalancerPropertiesFormat{FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{
		{Name: to.Ptr(svcA + "-IPv6"), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{PrivateIPAddress: to.Ptr("fd00::5")}},
		{Name: to.Ptr(svcA), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{PrivateIPAddress: to.Ptr("10.0.0.5")}},
	}}}
	if fe := PrivateLinkFrontend(lb, svcA); fe == nil || *fe.Name != svcA {
		t.Fatalf("IPv4 frontend not chosen: %v", fe)
	}
	lb.Properties.FrontendIPConfigurations = lb.Properties.FrontendIPConfigurations[:1]
	if fe := PrivateLinkFrontend(lb, svcA); fe != nil {
		t.Fatalf("an IPv6 frontend was chosen: %s", *fe.Name)
	}
}

func TestDecidePrivateLink(t *testing.T) {
	create := []svcOpt{withAnn(annotations.Internal, "true"), withAnn(annotations.PLSCreate, "true")}
	withName := append(append([]svcOpt{}, create...), withAnn(annotations.PLSName, "renamed"))
	withConfig := append(append([]svcOpt{}, create...), withAnn(annotations.PLSFQDNs, "a.example.com"))
	user := &armnetwork.PrivateLinkService{Name: to.Ptr("users"), Properties: &armnetwork.PrivateLinkServiceProperties{}}
	otherCluster := managedPLS("theirs", "ns/a")
	otherCluster.Tags[TagPLSCluster] = to.Ptr("another-cluster")
	for _, tc := range []struct {
		name     string
		opts     []svcOpt
		existing *armnetwork.PrivateLinkService
		ownerW   bool
		others   []string
		want     PrivateLinkDecision
		err      error
	}{
		{name: "nothing asked, nothing there", want: PrivateLinkDecision{}},
		{name: "create with the default name", opts: create, want: PrivateLinkDecision{Action: PLSWrite, Name: "pls-" + svcA}},
		{name: "create with the annotation's name", opts: withName, want: PrivateLinkDecision{Action: PLSWrite, Name: "renamed"}},
		{name: "the owner updates its PLS", opts: create, existing: managedPLS("pls-x", "ns/a"), ownerW: true,
			want: PrivateLinkDecision{Action: PLSWrite, Name: "pls-x"}},
		{name: "renaming is refused", opts: withName, existing: managedPLS("pls-x", "ns/a"), ownerW: true, err: ErrPLSRename},
		{name: "a user's PLS on the frontend is refused, never touched", opts: create, existing: user, err: ErrPLSNotManaged},
		{name: "another cluster's PLS is a user's", opts: create, existing: otherCluster, err: ErrPLSNotManaged},
		{name: "a user's PLS stays when nothing is asked", existing: user, want: PrivateLinkDecision{}},
		{name: "sharing the owner's PLS", opts: create, existing: managedPLS("pls-x", "ns/b"), ownerW: true, want: PrivateLinkDecision{}},
		{name: "sharing with own configuration is refused", opts: withConfig, existing: managedPLS("pls-x", "ns/b"), ownerW: true, err: ErrPLSOtherOwner},
		{name: "taking over from an owner that is gone", opts: create, existing: managedPLS("pls-x", "ns/b"),
			want: PrivateLinkDecision{Action: PLSWrite, Name: "pls-x"}},
		{name: "the owner no longer asks: handed to another", existing: managedPLS("pls-x", "ns/a"), others: []string{"ns/c", "ns/d"},
			want: PrivateLinkDecision{Action: PLSHandOver, Name: "pls-x", NewOwner: "ns/c"}},
		{name: "the owner no longer asks, nobody else does: deleted", existing: managedPLS("pls-x", "ns/a"),
			want: PrivateLinkDecision{Action: PLSDelete, Name: "pls-x"}},
		{name: "a sharer that never asked leaves the owner's PLS alone", existing: managedPLS("pls-x", "ns/b"), ownerW: true,
			want: PrivateLinkDecision{}},
		{name: "owner gone, nobody asks: the last sharer deletes it", existing: managedPLS("pls-x", "ns/b"),
			want: PrivateLinkDecision{Action: PLSDelete, Name: "pls-x"}},
		{name: "owner gone, another asks: left for that one to take over", existing: managedPLS("pls-x", "ns/b"), others: []string{"ns/c"},
			want: PrivateLinkDecision{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mkService(t, uidA, "a", tc.opts...)
			got, err := DecidePrivateLink(PrivateLinkInput{ClusterName: "kubernetes", Service: s, FrontendName: svcA,
				Existing: tc.existing, OwnerWants: tc.ownerW, OthersWanting: tc.others})
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("error %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("%+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func natView(p *armnetwork.PrivateLinkService) string {
	var out []string
	for _, c := range p.Properties.IPConfigurations {
		cp := c.Properties
		out = append(out, fmt.Sprintf("%s:%s:%v:%v", *c.Name, *cp.PrivateIPAllocationMethod, deref(cp.PrivateIPAddress), *cp.Primary))
	}
	return strings.Join(out, " ")
}

func TestApplyPrivateLink(t *testing.T) {
	spec := func(mod func(*annotations.PLSOptions)) PrivateLinkSpec {
		o := annotations.PLSOptions{Create: true, IPAddressCount: 1}
		if mod != nil {
			mod(&o)
		}
		return PrivateLinkSpec{ClusterName: "kubernetes", Location: "eastus", Owner: "ns/a", Options: o, FrontendID: plsFrontend,
			SubnetID: natSubnet, SubnetName: "pls-subnet", Tags: map[string]string{"env": "prod"}}
	}
	created, err := ApplyPrivateLink(nil, "pls-a", spec(nil))
	if err != nil {
		t.Fatal(err)
	}
	if *created.Name != "pls-a" || *created.Location != "eastus" || *created.Properties.LoadBalancerFrontendIPConfigurations[0].ID != plsFrontend {
		t.Fatalf("created %s", mustJSON(t, created))
	}
	if got := natView(created); got != "pls-subnet-pls-a-dynamic-0:Dynamic:<nil>:true" {
		t.Errorf("NAT configs %s", got)
	}
	if *created.Tags[TagPLSCluster] != "kubernetes" || *created.Tags[TagPLSOwner] != "ns/a" || *created.Tags["env"] != "prod" {
		t.Errorf("tags %v", mustJSON(t, created.Tags))
	}
	if created.Properties.Visibility != nil || created.Properties.Fqdns != nil || created.Properties.EnableProxyProtocol != nil {
		t.Errorf("unset options written: %s", mustJSON(t, created.Properties))
	}

	// Azure allocated the dynamic address: an unchanged spec keeps the configuration as it is.
	stored := clone(t, created)
	stored.Properties.IPConfigurations[0].Properties.PrivateIPAddress = to.Ptr("10.1.0.9")
	stored.Tags["users-own"] = to.Ptr("kept")
	again, err := ApplyPrivateLink(clone(t, stored), "pls-a", spec(nil))
	if err != nil || mustJSON(t, again) != mustJSON(t, stored) {
		t.Fatalf("an unchanged spec changed the PLS: %v\n%s\n%s", err, mustJSON(t, again), mustJSON(t, stored))
	}

	for _, tc := range []struct {
		name  string
		mod   func(*annotations.PLSOptions)
		check func(t *testing.T, p *armnetwork.PrivateLinkService)
	}{
		{"two addresses, one static: the static one is primary", func(o *annotations.PLSOptions) {
			o.IPAddressCount, o.IPAddresses = 2, []netip.Addr{netip.MustParseAddr("10.1.0.7")}
		}, func(t *testing.T, p *armnetwork.PrivateLinkService) {
			if got := natView(p); got != "pls-subnet-pls-a-static-10.1.0.7:Static:10.1.0.7:true pls-subnet-pls-a-dynamic-0:Dynamic:<nil>:false" {
				t.Errorf("NAT configs %s", got)
			}
		}},
		{"proxy protocol, FQDNs, visibility and auto-approval", func(o *annotations.PLSOptions) {
			o.ProxyProtocol, o.FQDNs, o.Visibility, o.AutoApproval = true, []string{"a.example.com"}, []string{"*"}, []string{"00000000-0000-0000-0000-000000000009"}
		}, func(t *testing.T, p *armnetwork.PrivateLinkService) {
			pp := p.Properties
			if !*pp.EnableProxyProtocol || *pp.Fqdns[0] != "a.example.com" || *pp.Visibility.Subscriptions[0] != "*" ||
				*pp.AutoApproval.Subscriptions[0] != "00000000-0000-0000-0000-000000000009" {
				t.Errorf("%s", mustJSON(t, pp))
			}
			if *p.Tags["users-own"] != "kept" {
				t.Error("a user's tag was removed")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ApplyPrivateLink(clone(t, stored), "pls-a", spec(tc.mod))
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, got)
		})
	}

	// Proxy protocol turned off again is written false, not left on.
	on := clone(t, stored)
	on.Properties.EnableProxyProtocol = to.Ptr(true)
	off, _ := ApplyPrivateLink(on, "pls-a", spec(nil))
	if *off.Properties.EnableProxyProtocol {
		t.Error("proxy protocol left on")
	}
	// Long names are cut to ARM's 80 characters, keeping the suffix.
	long := natConfigs(strings.Repeat("p", 90), annotations.PLSOptions{IPAddressCount: 1}, natSubnet, "pls-subnet")
	if n := *long[0].Name; len(n) != 80 || !strings.HasSuffix(n, "-dynamic-0") {
		t.Errorf("long name %q (%d)", n, len(n))
	}
	// A user's PLS is never changed.
	if _, err := ApplyPrivateLink(&armnetwork.PrivateLinkService{Name: to.Ptr("users")}, "users", spec(nil)); !errors.Is(err, ErrPLSNotManaged) {
		t.Errorf("a user's PLS: %v", err)
	}
}

func TestHandOverAndSubnet(t *testing.T) {
	p, err := HandOverPrivateLink(managedPLS("pls-x", "ns/a"), "kubernetes", "ns/c")
	if err != nil || PrivateLinkOwner(p) != "ns/c" {
		t.Fatalf("%v %v", PrivateLinkOwner(p), err)
	}
	if _, err := HandOverPrivateLink(&armnetwork.PrivateLinkService{Name: to.Ptr("users")}, "kubernetes", "ns/c"); !errors.Is(err, ErrPLSNotManaged) {
		t.Errorf("hand-over of a user's PLS: %v", err)
	}
	if p, err := HandOverPrivateLink(nil, "kubernetes", "ns/c"); p != nil || err != nil {
		t.Errorf("hand-over of a deleted PLS created it: %v %v", p, err)
	}
	for _, tc := range []struct {
		in   *armnetwork.Subnet
		want armnetwork.VirtualNetworkPrivateLinkServiceNetworkPolicies
	}{
		{&armnetwork.Subnet{}, armnetwork.VirtualNetworkPrivateLinkServiceNetworkPoliciesDisabled},
		{&armnetwork.Subnet{Properties: &armnetwork.SubnetPropertiesFormat{
			PrivateLinkServiceNetworkPolicies: to.Ptr(armnetwork.VirtualNetworkPrivateLinkServiceNetworkPoliciesEnabled)}}, armnetwork.VirtualNetworkPrivateLinkServiceNetworkPoliciesDisabled},
	} {
		got, err := DisablePrivateLinkPolicies(tc.in)
		if err != nil || *got.Properties.PrivateLinkServiceNetworkPolicies != tc.want {
			t.Errorf("%v %v", got, err)
		}
	}
	if _, err := DisablePrivateLinkPolicies(nil); err == nil {
		t.Error("a missing subnet must be an error, not created")
	}
	p = managedPLS("pls-x", "ns/a")
	p.Properties.PrivateEndpointConnections = []*armnetwork.PrivateEndpointConnection{{Name: to.Ptr("pe1.abc")}, {}}
	if got := ConnectionNames(p); fmt.Sprint(got) != "[pe1.abc]" {
		t.Errorf("ConnectionNames = %v", got)
	}
}
