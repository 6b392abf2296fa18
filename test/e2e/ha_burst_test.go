package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/internal/azsim/client"
	"github.com/azure-ccm/azure-ccm/internal/azsim/middleware"
	"github.com/azure-ccm/azure-ccm/test/framework"
	"github.com/azure-ccm/azure-ccm/test/framework/azurenames"
)

// TestLeaderElectionMidBurst: two replicas serve LoadBalancer services; the leader is killed
// (SIGKILL, lease not released) while a burst of services is half done under ARM-like write
// latency. The standby takes over within the lease duration and finishes the burst: every
// service ends with exactly one frontend, rule and managed public IP, and a service that had
// an address before the crash keeps it (no duplicate or lost change).
func TestLeaderElectionMidBurst(t *testing.T) {
	working(t)
	nodesRequireBinary(t, framework.CCMBinaryName)
	e := framework.Start(t, framework.Options{Topology: lbTopology(), CloudConfig: lbNodeIPConfig})
	e.CreateNodes(framework.NodeOptions{ProviderID: true}, e.Machines...)
	const leaseDuration = 6 * time.Second
	flags := []string{"--leader-elect=true", "--leader-elect-lease-duration=" + leaseDuration.String(),
		"--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s",
		"--controllers=service,cloud-node,cloud-node-lifecycle"}
	a := e.StartCCMReplica("a", flags...)
	b := e.StartCCMReplica("b", flags...)
	for _, m := range e.Machines {
		e.WaitFor("node "+m.NodeName+" initialized", e.NodeInitialized(m.NodeName), lbWait)
	}
	var leader, standby *framework.CCMReplica
	switch {
	case haHasAcquired(a) && !haHasAcquired(b):
		leader, standby = a, b
	case haHasAcquired(b) && !haHasAcquired(a):
		leader, standby = b, a
	default:
		t.Fatalf("want exactly one leader: a=%v b=%v", haHasAcquired(a), haHasAcquired(b))
	}
	f, err := lbARMClient(e.Azure)
	if err != nil {
		t.Fatal(err)
	}
	l := &lbEnv{Env: e, t: t, net: f, rg: e.Azure.ResourceGroup, ns: "default"}

	ctx := lbCtx(t)
	if err := e.Azsim.SetLatency(ctx, client.LatencyModel{Rules: []client.LatencyRule{
		{Class: "write", Delay: middleware.Duration(700 * time.Millisecond)},
		{Class: "read", Delay: middleware.Duration(30 * time.Millisecond)},
	}}); err != nil {
		t.Fatal(err)
	}
	const n = 24
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			svc := lbService(fmt.Sprintf("ha-%02d", i), nil, lbTCP(int32(9000+i)))
			if _, err := e.Kube.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
				t.Errorf("create: %v", err)
			}
		})
	}
	wg.Wait()

	// Kill the leader once some, but not all, services have an address.
	before := map[string]string{}
	l.waitFor("part of the burst served", func(ctx context.Context) (bool, error) {
		svcs, err := e.Kube.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		clear(before)
		for _, s := range svcs.Items {
			if ips := ingressIPs(&s); len(ips) > 0 {
				before[s.Name] = strings.Join(ips, ",")
			}
		}
		if len(before) == 0 {
			return false, fmt.Errorf("no service has an address yet")
		}
		return true, nil
	}, lbWait)
	if len(before) == n {
		t.Logf("note: every service was served before the kill; the handover still must not change anything")
	}
	crashed := time.Now()
	if err := syscall.Kill(-leader.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-leader.Done()
	l.waitFor("standby "+standby.Name+" takes over", func(context.Context) (bool, error) {
		return haHasAcquired(standby), fmt.Errorf("standby has not acquired the lease")
	}, 3*leaseDuration+30*time.Second)
	t.Logf("takeover %s after the crash, %d of %d services had an address", time.Since(crashed).Round(100*time.Millisecond), len(before), n)

	l.waitFor("every service has exactly its own frontend, rule, probe and public IP", func(ctx context.Context) (bool, error) {
		svcs, err := e.Kube.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		st, err := l.state(ctx)
		if err != nil {
			return false, err
		}
		lb := st.LBs[lbCluster]
		if lb == nil {
			return false, fmt.Errorf("no load balancer %s", lbCluster)
		}
		var owned []string
		for _, s := range svcs.Items {
			if !strings.HasPrefix(s.Name, "ha-") {
				continue // the cluster's own "kubernetes" service
			}
			ips := ingressIPs(&s)
			if len(ips) != 1 {
				return false, fmt.Errorf("%s has addresses %v", s.Name, ips)
			}
			if was, ok := before[s.Name]; ok && was != ips[0] {
				t.Fatalf("%s changed address across the handover: %s -> %s", s.Name, was, ips[0])
			}
			svcLB := azurenames.ServiceLBName(s.UID)
			v := view(lb, svcLB)
			if len(v.Frontends) != 1 || len(v.Rules) != 1 || len(v.Probes) != 1 {
				fes, rules, probes := v.names()
				return false, fmt.Errorf("%s on the LB: frontends %v rules %v probes %v", s.Name, fes, rules, probes)
			}
			var pips []string
			for k, p := range st.PIPs {
				if strings.Contains(*p.Name, svcLB) {
					pips = append(pips, k)
					if pipAddress(p) != ips[0] {
						return false, fmt.Errorf("%s: status %s, public IP %s has %s", s.Name, ips[0], k, pipAddress(p))
					}
				}
			}
			if len(pips) != 1 {
				return false, fmt.Errorf("%s has public IPs %v", s.Name, pips)
			}
			owned = append(owned, lbObjectsOf(lb, svcLB)...)
		}
		var all []string
		for _, fe := range lb.Properties.FrontendIPConfigurations {
			all = append(all, *fe.Name)
		}
		for _, fe := range all {
			if !slices.Contains(owned, fe) {
				return false, fmt.Errorf("frontend %s belongs to no service", fe)
			}
		}
		if len(all) != n {
			return false, fmt.Errorf("%d frontends for %d services", len(all), n)
		}
		return true, nil
	}, 2*lbWait)
}
