package loadbalancer

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/azsim/drift"
	"github.com/azure-ccm/azure-ccm/internal/azsim/middleware"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	"github.com/azure-ccm/azure-ccm/internal/azureid"
	"github.com/azure-ccm/azure-ccm/internal/changes"
	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
)

// auditEnv is a converged public service on the env's azsim and an auditor of it.
type auditEnv struct {
	*env
	a     *Auditor
	svc   *v1.Service
	nodes []*v1.Node
	lbID  string
	nsgID string
}

func newAuditEnv(t *testing.T) *auditEnv {
	t.Helper()
	e := newEnv(t, config.BackendPoolNodeIP)
	svc := service("abababab-0000-0000-0000-000000000001", "web", nil)
	nodes := []*v1.Node{node("node-0", "10.240.0.4", nil), node("node-1", "10.240.0.5", nil)}
	st, err := e.lb.EnsureLoadBalancer(ctxT(t), testCluster, svc, nodes)
	if err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer = *st
	a, err := NewAuditor(e.buildOpts, e.lb, 2)
	if err != nil {
		t.Fatal(err)
	}
	sub := topology.DefaultSubscriptionID
	return &auditEnv{env: e, a: a, svc: svc, nodes: nodes,
		lbID: azureid.LoadBalancer(sub, testRG, testCluster), nsgID: azureid.SecurityGroup(sub, testRG, "nsg")}
}

// live is a Confirm that finds the service as it is.
func (ae *auditEnv) live(context.Context) (*v1.Service, string, error) { return ae.svc, "", nil }

// audit refreshes and audits the service once.
func (ae *auditEnv) audit(t *testing.T, confirm Confirm) AuditResult {
	t.Helper()
	if _, err := ae.a.Refresh(ctxT(t), testCluster, []*v1.Service{ae.svc}); err != nil {
		t.Fatal(err)
	}
	res, err := ae.a.Audit(ctxT(t), testCluster, ae.svc, ae.nodes, confirm)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// kinds names what the drift was about, e.g. ["rule"].
func kinds(r AuditResult) []string {
	var out []string
	for _, w := range r.Drift {
		for _, c := range w.Changes {
			out = append(out, changes.Kind(w.ResourceType, c))
		}
	}
	return out
}

func TestAuditRepairsEachKindOfDriftWithOneWrite(t *testing.T) {
	ae := newAuditEnv(t)
	svcLB := naming.ServiceLBName(ae.svc.UID)
	lbBefore := canonLB(t, ae.getLB(t, testCluster))

	// In step: nothing found, nothing written, however often.
	for range 3 {
		before := ae.writes(t)
		if res := ae.audit(t, ae.live); len(res.Drift) != 0 || res.Repaired {
			t.Fatalf("audit of a service in step: %+v", res)
		}
		if n := ae.writes(t) - before; n != 0 {
			t.Fatalf("audit of a service in step wrote %d times", n)
		}
	}

	nsgRule := ""
	for _, r := range ae.nsgRules(t) {
		if strings.HasPrefix(*r.Name, "k8s-azure-lb_allow") {
			nsgRule = *r.Name
		}
	}
	for _, c := range []struct {
		name string
		req  drift.Request
		kind string
	}{
		{"rule deleted", drift.Request{Kind: drift.DeleteRule, Resource: ae.lbID, Name: svcLB + "-TCP-80"}, "rule"},
		{"probe changed", drift.Request{Kind: drift.ChangeProbe, Resource: ae.lbID, Name: svcLB + "-TCP-80"}, "probe"},
		{"NSG rule removed", drift.Request{Kind: drift.RemoveNSGRule, Resource: ae.nsgID, Name: nsgRule}, "nsg_rule"},
		{"pool member removed", drift.Request{Kind: drift.RemovePoolMember, Resource: ae.lbID, Pool: testCluster, Name: "10.240.0.5"}, "pool_member"},
		{"frontend public IP changed", drift.Request{Kind: drift.ChangeFrontendIP, Resource: ae.lbID, Name: svcLB}, "frontend"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := ae.srv.Drift(ctxT(t), c.req); err != nil {
				t.Fatal(err)
			}
			before := ae.writes(t)
			res := ae.audit(t, ae.live)
			if !res.Repaired || res.Skipped != "" {
				t.Fatalf("result %+v, want repaired", res)
			}
			if got := kinds(res); len(got) != 1 || got[0] != c.kind {
				t.Errorf("drift found %v, want [%s] (%+v)", got, c.kind, res.Drift)
			}
			if n := ae.writes(t) - before; n != 1 {
				t.Errorf("the repair wrote %d times, want 1", n)
			}
			if got := canonLB(t, ae.getLB(t, testCluster)); got != lbBefore {
				t.Errorf("load balancer after the repair:\n%s\nwant\n%s", got, lbBefore)
			}
			before = ae.writes(t)
			if res := ae.audit(t, ae.live); len(res.Drift) != 0 {
				t.Errorf("drift left after the repair: %+v", res.Drift)
			}
			if n := ae.writes(t) - before; n != 0 {
				t.Errorf("the audit after the repair wrote %d times", n)
			}
		})
	}
	found := false
	for _, r := range ae.nsgRules(t) {
		found = found || *r.Name == nsgRule
	}
	if !found {
		t.Errorf("NSG rule %s not back", nsgRule)
	}
}

// canonLB is the load balancer without ETags and provisioning states.
func canonLB(t *testing.T, lb *armnetwork.LoadBalancer) string {
	t.Helper()
	cs, err := changes.Diff(nil, lb)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, c := range cs {
		b.WriteString(changes.Describe(c) + "\n")
	}
	// Children are listed by name only: compare their content too.
	for _, r := range lb.Properties.LoadBalancingRules {
		b.WriteString(*r.Name + " " + *r.Properties.FrontendIPConfiguration.ID + "\n")
	}
	for _, p := range lb.Properties.Probes {
		fmt.Fprintf(&b, "%s %d\n", *p.Name, *p.Properties.IntervalInSeconds)
	}
	for _, f := range lb.Properties.FrontendIPConfigurations {
		b.WriteString(*f.Name + " " + *f.Properties.PublicIPAddress.ID + "\n")
	}
	for _, p := range lb.Properties.BackendAddressPools {
		for _, a := range p.Properties.LoadBalancerBackendAddresses {
			b.WriteString(*p.Name + " " + *a.Properties.IPAddress + "\n")
		}
	}
	return b.String()
}

func TestAuditSkipsAServiceNoLongerThere(t *testing.T) {
	ae := newAuditEnv(t)
	svcLB := naming.ServiceLBName(ae.svc.UID)
	if _, err := ae.srv.Drift(ctxT(t), drift.Request{Kind: drift.DeleteRule, Resource: ae.lbID, Name: svcLB + "-TCP-80"}); err != nil {
		t.Fatal(err)
	}
	before := ae.writes(t)
	res := ae.audit(t, func(context.Context) (*v1.Service, string, error) { return nil, "service deleted", nil })
	if res.Repaired || res.Skipped != "service deleted" || len(res.Drift) == 0 {
		t.Fatalf("result %+v, want the drift found and skipped", res)
	}
	if n := ae.writes(t) - before; n != 0 {
		t.Fatalf("wrote %d times for a service that is gone", n)
	}
}

// TestAuditAndDeletionNeverResurrect runs the deletion against an audit's repair in every
// order, with slow ARM writes: whatever the order, nothing of the service is left.
func TestAuditAndDeletionNeverResurrect(t *testing.T) {
	const (
		duringRepair = "deletion waits for the repair"
		beforeReRead = "deletion requested before the re-read"
		beforeAudit  = "deletion finished before the audit"
	)
	for _, order := range []string{duringRepair, beforeReRead, beforeAudit} {
		t.Run(order, func(t *testing.T) {
			ae := newAuditEnv(t)
			svcLB := naming.ServiceLBName(ae.svc.UID)
			if _, err := ae.srv.Drift(ctxT(t), drift.Request{Kind: drift.DeleteRule, Resource: ae.lbID, Name: svcLB + "-TCP-80"}); err != nil {
				t.Fatal(err)
			}
			ae.srv.Middleware().SetLatency(middleware.LatencyModel{Rules: []middleware.LatencyRule{
				{Class: middleware.Write, Delay: middleware.Duration(300 * time.Millisecond)}}})
			var wg sync.WaitGroup
			var delErr error
			del := func() {
				wg.Add(1)
				go func() {
					defer wg.Done()
					delErr = ae.lb.EnsureLoadBalancerDeleted(context.Background(), testCluster, ae.svc)
				}()
			}
			if order == beforeAudit {
				del()
				wg.Wait()
			}
			confirm := func(ctx context.Context) (*v1.Service, string, error) {
				switch order {
				case duringRepair:
					// The deletion starts now and must wait for the repair's writes.
					del()
					return ae.svc, "", nil
				case beforeReRead:
					// The service got its deletion timestamp just before the re-read; the
					// service controller's deletion waits for the audit's lock.
					del()
					return nil, "being deleted", nil
				}
				return nil, "service deleted", nil
			}
			if _, err := ae.a.Refresh(ctxT(t), testCluster, []*v1.Service{ae.svc}); err != nil {
				t.Fatal(err)
			}
			res, err := ae.a.Audit(ctxT(t), testCluster, ae.svc, ae.nodes, confirm)
			if err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			if delErr != nil {
				t.Fatal(delErr)
			}
			if (order == duringRepair) != res.Repaired {
				t.Errorf("repaired = %v (%+v)", res.Repaired, res)
			}
			if ae.lb.locks.held() != 0 {
				t.Errorf("%d service locks left", ae.lb.locks.held())
			}
			if lb, err := ae.net.NewLoadBalancersClient().Get(ctxT(t), testRG, testCluster, nil); err == nil {
				var left []string
				for _, f := range lb.Properties.FrontendIPConfigurations {
					left = append(left, *f.Name)
				}
				for _, r := range lb.Properties.LoadBalancingRules {
					left = append(left, *r.Name)
				}
				t.Errorf("load balancer left with %v", left)
			}
			for _, r := range ae.nsgRules(t) {
				if strings.HasPrefix(*r.Name, "k8s-azure-lb") {
					t.Errorf("NSG rule %s left", *r.Name)
				}
			}
			if _, err := ae.net.NewPublicIPAddressesClient().Get(ctxT(t), testRG, testCluster+"-"+svcLB, nil); err == nil {
				t.Error("public IP left")
			}
		})
	}
}

// TestAuditFingerprint: the fingerprint moves with every change someone else makes to the load
// balancer, the NSG or a public IP, and not with the CCM's own writes (a new service: its
// public IP, frontend, rules and NSG rule).
func TestAuditFingerprint(t *testing.T) {
	ae := newAuditEnv(t)
	svcs := []*v1.Service{ae.svc}
	refresh := func() string {
		t.Helper()
		fp, err := ae.a.Refresh(ctxT(t), testCluster, svcs)
		if err != nil {
			t.Fatal(err)
		}
		return fp
	}
	fp1 := refresh()
	if fp2 := refresh(); fp2 != fp1 {
		t.Fatalf("fingerprint moved with nothing changed: %s → %s", fp1, fp2)
	}

	other := service("cdcdcdcd-0000-0000-0000-000000000002", "api", nil, v1.ServicePort{Name: "https", Port: 443, NodePort: 30443, Protocol: v1.ProtocolTCP})
	st, err := ae.lb.EnsureLoadBalancer(ctxT(t), testCluster, other, ae.nodes)
	if err != nil {
		t.Fatal(err)
	}
	other.Status.LoadBalancer = *st
	svcs = append(svcs, other)
	if fp := refresh(); fp != fp1 {
		t.Fatal("the fingerprint moved with the CCM's own writes (a new service)")
	}

	// Someone else tags the new service's public IP.
	pips := ae.net.NewPublicIPAddressesClient()
	var pip *armnetwork.PublicIPAddress
	for pager := pips.NewListPager(testRG, nil); pager.More(); {
		page, err := pager.NextPage(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range page.Value {
			if p.Properties != nil && p.Properties.IPAddress != nil && *p.Properties.IPAddress == st.Ingress[0].IP {
				pip = p
			}
		}
	}
	if pip == nil {
		t.Fatalf("no public IP with address %s", st.Ingress[0].IP)
	}
	if pip.Tags == nil {
		pip.Tags = map[string]*string{}
	}
	pip.Tags["owner"] = to.Ptr("someone else")
	poller, err := pips.BeginCreateOrUpdate(ctxT(t), testRG, *pip.Name, *pip, nil)
	if err == nil {
		_, err = poller.PollUntilDone(ctxT(t), nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	fp3 := refresh()
	if fp3 == fp1 {
		t.Fatal("the fingerprint does not show a public IP changed by someone else")
	}
	if fp := refresh(); fp != fp3 {
		t.Fatal("the fingerprint moved with nothing changed after the public IP edit")
	}

	if _, err := ae.srv.Drift(ctxT(t), drift.Request{Kind: drift.DeleteRule, Resource: ae.lbID, Name: naming.ServiceLBName(ae.svc.UID) + "-TCP-80"}); err != nil {
		t.Fatal(err)
	}
	fp5 := refresh()
	if fp5 == fp3 {
		t.Fatal("the fingerprint does not show the drift")
	}
	nsgRule := ""
	for _, r := range ae.nsgRules(t) {
		nsgRule = *r.Name
	}
	if _, err := ae.srv.Drift(ctxT(t), drift.Request{Kind: drift.RemoveNSGRule, Resource: ae.nsgID, Name: nsgRule}); err != nil {
		t.Fatal(err)
	}
	if fp := refresh(); fp == fp5 {
		t.Fatal("the fingerprint does not show an NSG rule removed")
	}
}
