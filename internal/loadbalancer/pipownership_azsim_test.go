package loadbalancer

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/middleware"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/pipgroups"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/plan"
)

const otherRG = "rg-other"

// newPIPEnv is newEnv with a second resource group and a durable record of public IP groups
// (shared by the implementations the test builds, as the ConfigMap is by CCM processes).
func newPIPEnv(t *testing.T) (*env, *pipgroups.Memory) {
	t.Helper()
	e := newEnv(t, config.BackendPoolNodeIP)
	if _, err := e.srv.Seed(ctxT(t), &topology.Topology{ResourceGroups: []string{otherRG}}); err != nil {
		t.Fatal(err)
	}
	rec := &pipgroups.Memory{}
	e.build(t, BuildOptions{PIPGroups: rec})
	return e, rec
}

func (e *env) createPIP(t *testing.T, rg, name string, tags map[string]string) *armnetwork.PublicIPAddress {
	t.Helper()
	p := armnetwork.PublicIPAddress{Location: to.Ptr("eastus"), Tags: map[string]*string{},
		SKU: &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard)},
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic),
			PublicIPAddressVersion: to.Ptr(armnetwork.IPVersionIPv4)}}
	for k, v := range tags {
		p.Tags[k] = to.Ptr(v)
	}
	poller, err := e.net.NewPublicIPAddressesClient().BeginCreateOrUpdate(ctxT(t), rg, name, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := poller.PollUntilDone(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	return &res.PublicIPAddress
}

// pips are the public IPs of both groups, "<rg>/<name>" → service tag ("-" for none).
func (e *env) pips(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, rg := range []string{testRG, otherRG} {
		pager := e.net.NewPublicIPAddressesClient().NewListPager(rg, nil)
		for pager.More() {
			page, err := pager.NextPage(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range page.Value {
				v, ok := naming.ServiceTagValue(p.Tags)
				if !ok {
					v = "-"
				}
				out[rg+"/"+*p.Name] = v
			}
		}
	}
	return out
}

func (e *env) ensureIP(t *testing.T, svc *v1.Service) string {
	t.Helper()
	st, err := e.lb.EnsureLoadBalancer(ctxT(t), testCluster, svc, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer = *st
	return st.Ingress[0].IP
}

func managedName(svc *v1.Service) string {
	return naming.PublicIPName(testCluster, naming.ServiceLBName(svc.UID), "", false, naming.IPv4)
}

func wantPIPs(t *testing.T, got map[string]string, want ...string) {
	t.Helper()
	var names []string
	for k, v := range got {
		names = append(names, k+"="+v)
	}
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("public IPs %v, want %v", names, want)
	}
}

// TestResourceGroupChangeReleasesTheOldPublicIP: a service moved to another group (to a user's
// public IP there, or to its default name there) releases the managed public IP of the group it
// left, in both directions, also when the implementation was rebuilt (a CCM restart) after the
// annotation changed.
func TestResourceGroupChangeReleasesTheOldPublicIP(t *testing.T) {
	e, rec := newPIPEnv(t)
	user := e.createPIP(t, otherRG, "user-pip", nil)
	svc := service("a1a1a1a1-0000-0000-0000-000000000001", "move", nil)
	e.ensureIP(t, svc)
	wantPIPs(t, e.pips(t), testRG+"/"+managedName(svc)+"=default/move", otherRG+"/user-pip=-")

	svc.Annotations = map[string]string{annotations.ResourceGroup: otherRG, annotations.PIPName: "user-pip"}
	if ip := e.ensureIP(t, svc); ip != *user.Properties.IPAddress {
		t.Fatalf("service on %s, want the user's %s", ip, *user.Properties.IPAddress)
	}
	wantPIPs(t, e.pips(t), otherRG+"/user-pip=-")

	// Default name in the other group (recorded), then back, with a restart in between.
	svc.Annotations = map[string]string{annotations.ResourceGroup: otherRG}
	e.ensureIP(t, svc)
	wantPIPs(t, e.pips(t), otherRG+"/"+managedName(svc)+"=default/move", otherRG+"/user-pip=-")
	if got := rec.Groups(ctxT(t)); !slices.Equal(got, []string{otherRG}) {
		t.Fatalf("recorded groups %v", got)
	}
	svc.Annotations = nil
	e.build(t, BuildOptions{PIPGroups: rec})
	e.ensureIP(t, svc)
	wantPIPs(t, e.pips(t), testRG+"/"+managedName(svc)+"=default/move", otherRG+"/user-pip=-")

	if err := e.lb.EnsureLoadBalancerDeleted(ctxT(t), testCluster, svc); err != nil {
		t.Fatal(err)
	}
	wantPIPs(t, e.pips(t), otherRG+"/user-pip=-")
}

// TestDeletionFindsPublicIPsInRecordedGroups: a service deleted after its annotation left the
// group of its managed public IP (while the CCM was down: a new implementation) releases it,
// found through the record; without the record it would not be found.
func TestDeletionFindsPublicIPsInRecordedGroups(t *testing.T) {
	e, rec := newPIPEnv(t)
	svc := service("a2a2a2a2-0000-0000-0000-000000000001", "gone", map[string]string{annotations.ResourceGroup: otherRG})
	e.ensureIP(t, svc)
	svc.Annotations = nil
	e.build(t, BuildOptions{PIPGroups: rec})
	if _, exists, err := e.lb.GetLoadBalancer(ctxT(t), testCluster, svc); err != nil || !exists {
		t.Fatalf("GetLoadBalancer: exists=%v err=%v", exists, err)
	}
	if err := e.lb.EnsureLoadBalancerDeleted(ctxT(t), testCluster, svc); err != nil {
		t.Fatal(err)
	}
	wantPIPs(t, e.pips(t))
}

// TestSharedPublicIPDeletedByItsLastServices: the last services of a managed public IP delete it
// although they named it by address and by name (the service that created it left first).
func TestSharedPublicIPDeletedByItsLastServices(t *testing.T) {
	e, _ := newPIPEnv(t)
	owner := service("a3a3a3a3-0000-0000-0000-000000000001", "owner", nil)
	ip := e.ensureIP(t, owner)
	byIP := service("a3a3a3a3-0000-0000-0000-000000000002", "by-ip", nil, v1.ServicePort{Name: "p", Port: 81, NodePort: 30081, Protocol: v1.ProtocolTCP})
	byIP.Spec.LoadBalancerIP = ip
	byName := service("a3a3a3a3-0000-0000-0000-000000000003", "by-name", map[string]string{annotations.PIPName: managedName(owner)},
		v1.ServicePort{Name: "p", Port: 82, NodePort: 30082, Protocol: v1.ProtocolTCP})
	e.ensureIP(t, byIP)
	e.ensureIP(t, byName)
	shared := testRG + "/" + managedName(owner)
	wantPIPs(t, e.pips(t), shared+"=default/owner,default/by-ip,default/by-name")
	for i, svc := range []*v1.Service{owner, byIP, byName} {
		if err := e.lb.EnsureLoadBalancerDeleted(ctxT(t), testCluster, svc); err != nil {
			t.Fatal(err)
		}
		switch i {
		case 0:
			wantPIPs(t, e.pips(t), shared+"=default/by-ip,default/by-name")
		case 1:
			wantPIPs(t, e.pips(t), shared+"=default/by-name")
		}
	}
	wantPIPs(t, e.pips(t))
}

// TestSweepReleasesPublicIPsOfGoneServices: the audit's sweep deletes public IPs with the
// cluster's name tag whose services are gone (or that list none), in the recorded groups too,
// unbinds gone services from one still used, and leaves a user's "service"-tagged public IP,
// another cluster's and a live service's alone.
func TestSweepReleasesPublicIPsOfGoneServices(t *testing.T) {
	e, rec := newPIPEnv(t)
	live := service("a4a4a4a4-0000-0000-0000-000000000001", "live", map[string]string{annotations.ResourceGroup: otherRG})
	e.ensureIP(t, live)
	owned := func(services string) map[string]string {
		return map[string]string{naming.TagService: services, naming.TagClusterName: testCluster}
	}
	e.createPIP(t, otherRG, "left-gone", owned("default/deleted"))
	e.createPIP(t, testRG, "left-empty", owned(""))
	e.createPIP(t, testRG, "shared-left", owned("default/deleted,default/live"))
	e.createPIP(t, testRG, "users", map[string]string{"service": "frontend"})
	e.createPIP(t, testRG, "other-cluster", map[string]string{naming.TagService: "default/deleted", naming.TagClusterName: "other"})
	e.createPIP(t, otherRG, "left-gone-too", owned("default/deleted-too"))

	a, err := NewAuditor(e.buildOpts, e.lb, 1)
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	gone := func(_ context.Context, key string) (bool, error) {
		asked = append(asked, key)
		return key != "default/live", nil
	}
	svcs := []*v1.Service{live}
	if _, err := a.Refresh(ctxT(t), testCluster, svcs); err != nil {
		t.Fatal(err)
	}
	res, err := a.SweepPublicIPs(ctxT(t), testCluster, svcs, gone)
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted != 3 || res.Unbound != 1 {
		t.Fatalf("sweep %+v", res)
	}
	wantPIPs(t, e.pips(t), otherRG+"/"+managedName(live)+"=default/live", testRG+"/shared-left=default/live",
		testRG+"/users=frontend", testRG+"/other-cluster=default/deleted")
	slices.Sort(asked)
	if strings.Join(asked, ",") != "default/deleted,default/deleted-too,default/live" {
		t.Fatalf("asked about %v (each once, only entries of the cluster's public IPs)", asked)
	}
	if !slices.Equal(rec.Groups(ctxT(t)), []string{otherRG}) {
		t.Fatalf("record %v", rec.Groups(ctxT(t)))
	}
	// In step: nothing more to release.
	if res, err := a.SweepPublicIPs(ctxT(t), testCluster, svcs, gone); err != nil || len(res.Names) != 0 {
		t.Fatalf("second sweep %+v %v", res, err)
	}
}

// TestUnlistableGroupsAreSkipped: recorded groups a service does not need do not block it: one
// that no longer exists holds nothing, one that cannot be listed (its permission removed) is
// skipped; only the service's own group must be listed.
func TestUnlistableGroupsAreSkipped(t *testing.T) {
	e, rec := newPIPEnv(t)
	for _, rg := range []string{"rg-deleted-long-ago", otherRG} {
		if err := rec.Add(ctxT(t), rg); err != nil {
			t.Fatal(err)
		}
	}
	for rg, f := range map[string]middleware.Fault{
		otherRG:               {Status: 403, Code: "AuthorizationFailed"},
		"rg-deleted-long-ago": {Status: 404, Code: "ResourceGroupNotFound"},
	} {
		f.Kind, f.Method, f.PathContains = middleware.FaultError, "GET", "/resourceGroups/"+rg+"/providers/Microsoft.Network/publicIPAddresses"
		if _, err := e.srv.Client().AddFault(ctxT(t), f); err != nil {
			t.Fatal(err)
		}
	}
	svc := service("a5a5a5a5-0000-0000-0000-000000000001", "web", nil)
	e.ensureIP(t, svc)
	if err := e.lb.EnsureLoadBalancerDeleted(ctxT(t), testCluster, svc); err != nil {
		t.Fatal(err)
	}
	there := service("a5a5a5a5-0000-0000-0000-000000000002", "there", map[string]string{annotations.ResourceGroup: otherRG})
	if _, err := e.lb.EnsureLoadBalancer(ctxT(t), testCluster, there, nil); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("a service whose own group cannot be listed: %v, want the 403", err)
	}
}

// allowDestinations are the destinations of the NSG's managed allow rules.
func (e *env) allowDestinations(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, r := range e.nsgRules(t) {
		p := r.Properties
		if !strings.HasPrefix(*r.Name, "k8s-azure-lb_allow_") || p == nil {
			continue
		}
		if p.DestinationAddressPrefix != nil && *p.DestinationAddressPrefix != "" {
			out = append(out, *p.DestinationAddressPrefix)
		}
		for _, d := range p.DestinationAddressPrefixes {
			out = append(out, *d)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestInterruptedGroupMoveLeavesNoNSGRule: a reconcile that moved the service's public IP to
// another group and rewrote the NSG for the new address, then failed before the status was
// written (the old public IP could not be deleted), leaves the status on the old address. When
// the annotation goes back before a reconcile succeeds, the address of the public IP it now
// releases is in neither the status nor the frontend: its NSG rule must still go.
func TestInterruptedGroupMoveLeavesNoNSGRule(t *testing.T) {
	e, _ := newPIPEnv(t)
	svc := service("a6a6a6a6-0000-0000-0000-000000000001", "move", nil)
	first := e.ensureIP(t, svc)

	fault, err := e.srv.Client().AddFault(ctxT(t), middleware.Fault{Kind: middleware.FaultError, Method: "DELETE",
		PathContains: "/resourceGroups/" + testRG + "/providers/Microsoft.Network/publicIPAddresses/", Status: 403, Code: "AuthorizationFailed"})
	if err != nil {
		t.Fatal(err)
	}
	svc.Annotations = map[string]string{annotations.ResourceGroup: otherRG}
	if _, err := e.lb.EnsureLoadBalancer(ctxT(t), testCluster, svc, nil); err == nil {
		t.Fatal("the move succeeded although the old public IP could not be deleted")
	}
	faults, err := e.srv.Client().Faults(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(faults, func(f middleware.Fault) bool { return f.ID == fault.ID }); i < 0 || faults[i].Hits == 0 {
		t.Fatalf("the fault on the old public IP's deletion hit no request: %+v", faults)
	}
	moved := e.allowDestinations(t)
	if slices.Contains(moved, first) || len(moved) != 1 {
		t.Fatalf("after the interrupted move the NSG allows %v, want only the new address (not %s)", moved, first)
	}
	if err := e.srv.Client().ClearFaults(ctxT(t)); err != nil {
		t.Fatal(err)
	}

	svc.Annotations = nil
	if ip := e.ensureIP(t, svc); ip != first {
		t.Fatalf("back in its group the service has %s, want its first address %s", ip, first)
	}
	wantPIPs(t, e.pips(t), testRG+"/"+managedName(svc)+"=default/move")
	if got := e.allowDestinations(t); !slices.Equal(got, []string{first}) {
		t.Fatalf("NSG allow rules for %v, want only %s (the moved-to address %v is released)", got, first, moved)
	}
}

// TestDeletionListsTheGroupsItsFrontendsUse: a service being deleted whose annotation moved its
// public IP group after its frontend was made (the CCM restarted in between) still uses a
// public IP of the old group. While that group cannot be listed (throttled), GetLoadBalancer
// and EnsureLoadBalancerDeleted fail instead of reporting no load balancer, which let the
// controller drop the finalizer with the frontend, its rules, the public IP and its NSG rule
// left in Azure. Once the group lists, the deletion removes all of it.
func TestDeletionListsTheGroupsItsFrontendsUse(t *testing.T) {
	e, rec := newPIPEnv(t)
	svc := service("a7a7a7a7-0000-0000-0000-000000000001", "leaving", nil)
	e.ensureIP(t, svc)
	svc.Annotations = map[string]string{annotations.ResourceGroup: otherRG}
	e.build(t, BuildOptions{PIPGroups: rec}) // a restart: no list cached
	if _, err := e.srv.Client().AddFault(ctxT(t), middleware.Fault{Kind: middleware.FaultError, Method: "GET",
		PathContains: "/resourceGroups/" + testRG + "/providers/Microsoft.Network/publicIPAddresses", Status: 429, Code: "SubscriptionRequestsThrottled"}); err != nil {
		t.Fatal(err)
	}
	if _, exists, err := e.lb.GetLoadBalancer(ctxT(t), testCluster, svc); err == nil {
		t.Fatalf("GetLoadBalancer with the frontend's public IP group unlistable: exists=%v and no error", exists)
	}
	if err := e.lb.EnsureLoadBalancerDeleted(ctxT(t), testCluster, svc); err == nil {
		t.Fatal("EnsureLoadBalancerDeleted succeeded without listing the group of its frontend's public IP")
	}
	if err := e.srv.Client().ClearFaults(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if _, exists, err := e.lb.GetLoadBalancer(ctxT(t), testCluster, svc); err != nil || !exists {
		t.Fatalf("GetLoadBalancer: exists=%v err=%v, want the frontend found", exists, err)
	}
	if err := e.lb.EnsureLoadBalancerDeleted(ctxT(t), testCluster, svc); err != nil {
		t.Fatal(err)
	}
	wantPIPs(t, e.pips(t))
	if got := e.allowDestinations(t); len(got) != 0 {
		t.Fatalf("NSG allow rules left for %v", got)
	}
	// Its only service gone, the load balancer is deleted; if it were kept, nothing of the
	// service may be on it.
	resp, err := e.net.NewLoadBalancersClient().Get(ctxT(t), testRG, testCluster, nil)
	switch {
	case arm.IsNotFound(err):
	case err != nil:
		t.Fatal(err)
	case plan.HasServiceObjects(&resp.LoadBalancer, naming.ServiceLBName(svc.UID)):
		t.Fatal("the service's frontend, rules or probes are still on the load balancer")
	}
}
