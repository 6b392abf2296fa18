package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/azure-ccm/azure-ccm/test/framework"
	"github.com/azure-ccm/azure-ccm/test/framework/azurenames"
)

// TestLoadBalancerDualStackNICPools: a dual-stack service with NIC-based (nodeIPConfiguration)
// pools on a dual-stack Uniform scale set: every instance's IPv4 ip configuration is in the IPv4
// pool and its IPv6 ip configuration in the IPv6 pool; an out-of-service taint sets Down on both
// of the node's entries and no other; untaint restores None; deletion removes the load balancer.
func TestLoadBalancerDualStackNICPools(t *testing.T) {
	working(t)
	topo := framework.DualStackTopology()
	topo.ResourceGroups = append(topo.ResourceGroups, "rg-pips") // l.state lists PIPs there too
	l := lbStart(t, lbOptions{Topology: topo, DualStack: true, CloudConfig: map[string]any{"enableLoadBalancerAdminState": true}})

	c := dsCase{families: []azurenames.Family{azurenames.IPv4, azurenames.IPv6}}
	l.create(c.service("ds-nic", 80))
	s := l.waitIP("ds-nic")
	dsIngressByFamily(t, s, c)
	l.waitFor("each node's IPv4 config in the IPv4 pool and IPv6 config in the IPv6 pool, none Down", l.dsNICStateIs(), lbWait)

	n0 := l.Machines[0].NodeName
	before := l.stats().Writes("backendAddressPools")
	adminStateShutDown(t, l.Env, n0)
	l.waitFor(n0+" Down in both NIC pools", l.dsNICStateIs(n0), lbWait)
	if got := l.stats().Writes("backendAddressPools") - before; got != 2 {
		t.Errorf("%d pool writes for one tainted node, want one per pool (2)", got)
	}
	adminStateBackInService(t, l.Env, n0)
	l.waitFor(n0+" restored in both NIC pools", l.dsNICStateIs(), lbWait)

	l.deleteAndWaitGone(l.get("ds-nic"))
	l.waitFor("load balancer deleted", func(ctx context.Context) (bool, error) {
		st, err := l.state(ctx)
		if err != nil {
			return false, err
		}
		return len(st.LBs) == 0, fmt.Errorf("load balancers left: %v", sortedKeys(st.LBs))
	}, lbWait)
}

// dsNICConfigName is the name of a machine's ip configuration of a family in the dual-stack
// topology (see internal/azsim/topology ipConfigs).
func dsNICConfigName(f azurenames.Family) string {
	if f == azurenames.IPv6 {
		return "ipconfig-v6"
	}
	return "ipconfig1"
}

// dsNICStateIs holds when, for each family, the public load balancer's pool of that family
// has as members exactly each machine's ip configuration of that family, those of the machines
// in down with admin state Down and every other one not Down.
func (l *lbEnv) dsNICStateIs(down ...string) framework.Condition {
	return func(ctx context.Context) (bool, error) {
		for _, f := range []azurenames.Family{azurenames.IPv4, azurenames.IPv6} {
			pool := azurenames.BackendPoolName(lbCluster, f)
			p, err := l.net.NewLoadBalancerBackendAddressPoolsClient().Get(ctx, l.rg, lbCluster, pool, nil)
			if err != nil {
				return false, err
			}
			var members []string
			states := map[string]string{}
			if p.Properties != nil {
				for _, c := range p.Properties.BackendIPConfigurations {
					members = append(members, strings.ToLower(deref(c.ID)))
				}
				for _, a := range p.Properties.LoadBalancerBackendAddresses {
					if a.Properties != nil && a.Properties.NetworkInterfaceIPConfiguration != nil {
						states[strings.ToLower(deref(a.Properties.NetworkInterfaceIPConfiguration.ID))] = string(deref(a.Properties.AdminState))
					}
				}
			}
			sort.Strings(members)
			var want []string
			for _, m := range l.Machines {
				prefix := strings.ToLower(strings.TrimPrefix(m.ProviderID, "azure://")) + "/networkinterfaces/"
				var mine []string
				for _, id := range members {
					if strings.HasPrefix(id, prefix) {
						mine = append(mine, id)
					}
				}
				if len(mine) != 1 || lastSeg(mine[0]) != dsNICConfigName(f) {
					return false, fmt.Errorf("%s: %s members %v, want its %s", pool, m.NodeName, mine, dsNICConfigName(f))
				}
				want = append(want, mine[0])
				if (states[mine[0]] == "Down") != slices.Contains(down, m.NodeName) {
					return false, fmt.Errorf("%s: %s admin state %q; want Down only for %v", pool, mine[0], states[mine[0]], down)
				}
			}
			sort.Strings(want)
			if !slices.Equal(members, want) {
				return false, fmt.Errorf("%s members %v, want only %v", pool, members, want)
			}
		}
		return true, nil
	}
}
