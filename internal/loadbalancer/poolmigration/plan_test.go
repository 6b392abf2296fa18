package poolmigration

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	rg    = "/subscriptions/s/resourceGroups/rg/providers/"
	lbID  = rg + "Microsoft.Network/loadBalancers/kubernetes"
	pool  = lbID + "/backendAddressPools/kubernetes"
	pool6 = lbID + "/backendAddressPools/kubernetes-IPv6"
	stage = lbID + "/backendAddressPools/kubernetes_ip-migration"
	ssID  = rg + "Microsoft.Compute/virtualMachineScaleSets/ss"
)

func nicIPC(vm string) string {
	return rg + "Microsoft.Network/networkInterfaces/" + vm + "-nic/ipConfigurations/ipconfig1"
}
func ssIPC(i int) string {
	return fmt.Sprintf("%s/virtualMachines/%d/networkInterfaces/nic/ipConfigurations/ipconfig1", ssID, i)
}

type lbSpec struct {
	members   []string // NIC-based members of <cluster>
	members6  []string
	ipEntries []string // addresses of <cluster> (IP-based)
	staging   []string // addresses of the staging pool (nil: absent)
	ruleTo    string   // pool ID the rule uses
	natTo     string
}

func mkLB(s lbSpec) *armnetwork.LoadBalancer {
	lb := &armnetwork.LoadBalancer{ID: to.Ptr(lbID), Name: to.Ptr("kubernetes"), Properties: &armnetwork.LoadBalancerPropertiesFormat{}}
	add := func(id, name string, members, addrs []string) {
		p := &armnetwork.BackendAddressPool{ID: to.Ptr(id), Name: to.Ptr(name), Properties: &armnetwork.BackendAddressPoolPropertiesFormat{}}
		for _, m := range members {
			p.Properties.BackendIPConfigurations = append(p.Properties.BackendIPConfigurations, &armnetwork.InterfaceIPConfiguration{ID: to.Ptr(m)})
		}
		for _, a := range addrs {
			p.Properties.LoadBalancerBackendAddresses = append(p.Properties.LoadBalancerBackendAddresses, &armnetwork.LoadBalancerBackendAddress{
				Name: to.Ptr("n"), Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{IPAddress: to.Ptr(a)}})
		}
		lb.Properties.BackendAddressPools = append(lb.Properties.BackendAddressPools, p)
	}
	add(pool, "kubernetes", s.members, s.ipEntries)
	if s.members6 != nil {
		add(pool6, "kubernetes-IPv6", s.members6, nil)
	}
	if s.staging != nil {
		add(stage, "kubernetes_ip-migration", nil, s.staging)
	}
	if s.ruleTo != "" {
		lb.Properties.LoadBalancingRules = []*armnetwork.LoadBalancingRule{{Name: to.Ptr("r"), Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
			BackendAddressPool: &armnetwork.SubResource{ID: to.Ptr(s.ruleTo)}}}}
	}
	if s.natTo != "" {
		lb.Properties.InboundNatRules = []*armnetwork.InboundNatRule{{Name: to.Ptr("ssh"), Properties: &armnetwork.InboundNatRulePropertiesFormat{
			BackendAddressPool: &armnetwork.SubResource{ID: to.Ptr(s.natTo)}}}}
	}
	return lb
}

// mkLBNamed is mkLB with the cluster pool called pool (no rules).
func mkLBNamed(pool string, s lbSpec) *armnetwork.LoadBalancer {
	lb := mkLB(s)
	p := lb.Properties.BackendAddressPools[0]
	p.Name, p.ID = to.Ptr(pool), to.Ptr(lbID+"/backendAddressPools/"+pool)
	return lb
}

func scaleSet(pools ...string) *armcompute.VirtualMachineScaleSet {
	var refs []*armcompute.SubResource
	for _, p := range pools {
		refs = append(refs, &armcompute.SubResource{ID: to.Ptr(p)})
	}
	return &armcompute.VirtualMachineScaleSet{ID: to.Ptr(ssID), Name: to.Ptr("ss"), Properties: &armcompute.VirtualMachineScaleSetProperties{
		VirtualMachineProfile: &armcompute.VirtualMachineScaleSetVMProfile{NetworkProfile: &armcompute.VirtualMachineScaleSetNetworkProfile{
			NetworkInterfaceConfigurations: []*armcompute.VirtualMachineScaleSetNetworkConfiguration{{Name: to.Ptr("nic"),
				Properties: &armcompute.VirtualMachineScaleSetNetworkConfigurationProperties{IPConfigurations: []*armcompute.VirtualMachineScaleSetIPConfiguration{{
					Name: to.Ptr("ipconfig1"), Properties: &armcompute.VirtualMachineScaleSetIPConfigurationProperties{LoadBalancerBackendAddressPools: refs}}}}}}}}}}
}

func node(name string, ips ...string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, ip := range ips {
		n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
	}
	return n
}

var clusterNodes = []Node{
	{Node: node("vm-a", "10.0.0.4", "fd00::4"), IPConfigs: []string{nicIPC("vm-a")}},
	{Node: node("vm-b", "10.0.0.5"), IPConfigs: []string{nicIPC("vm-b")}},
	{Node: node("ss000000", "10.0.0.6"), IPConfigs: []string{ssIPC(0)}},
}

// summary renders a plan as "phase target [pools/changes]" lines.
func summary(p *Plan) string {
	var out []string
	for _, s := range p.Steps {
		line := s.Phase.String() + " " + s.Target[strings.LastIndex(s.Target, "/")+1:]
		for _, ps := range s.Pools {
			line += " " + ps.Pool
			if ps.Entries != nil {
				var e []string
				for a, n := range ps.Entries {
					e = append(e, n+"="+a)
				}
				sort.Strings(e)
				line += "{" + strings.Join(e, ",") + "}"
			}
		}
		for _, id := range s.PoolIDs {
			line += " -" + id[strings.LastIndex(id, "/")+1:]
		}
		if s.Edit != nil {
			for _, c := range s.Edit.Changes {
				line += " -" + c.PoolID[strings.LastIndex(c.PoolID, "/")+1:]
			}
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

func TestBuild(t *testing.T) {
	allRefs := map[string][]string{nicIPC("vm-a"): {pool}, nicIPC("vm-b"): {pool}, ssIPC(0): {pool}}
	members := []string{nicIPC("vm-a"), nicIPC("vm-b"), ssIPC(0)}
	for _, tc := range []struct {
		name     string
		in       Input
		want     string
		warnings string
	}{
		{name: "NIC-based: stage, detach, finish",
			in: Input{LoadBalancers: []*armnetwork.LoadBalancer{mkLB(lbSpec{members: members, ruleTo: pool})}, ScaleSets: []*armcompute.VirtualMachineScaleSet{scaleSet(pool)},
				Refs: allRefs, Nodes: clusterNodes},
			want: `stage kubernetes kubernetes{ss000000=10.0.0.6,vm-a=10.0.0.4,vm-b=10.0.0.5}
detach-models ss -kubernetes
detach-nodes 0 -kubernetes
detach-nodes vm-a-nic -kubernetes
detach-nodes vm-b-nic -kubernetes
finish kubernetes kubernetes`},
		{name: "staged: detach, then finish",
			in: Input{LoadBalancers: []*armnetwork.LoadBalancer{mkLB(lbSpec{members: members, staging: []string{"10.0.0.4"}, ruleTo: stage})},
				ScaleSets: []*armcompute.VirtualMachineScaleSet{scaleSet(pool)}, Refs: allRefs, Nodes: clusterNodes},
			want: `detach-models ss -kubernetes
detach-nodes 0 -kubernetes
detach-nodes vm-a-nic -kubernetes
detach-nodes vm-b-nic -kubernetes
finish kubernetes kubernetes`},
		{name: "staged, a rule still on the pool: handed over again",
			in:   Input{LoadBalancers: []*armnetwork.LoadBalancer{mkLB(lbSpec{staging: []string{"10.0.0.4"}, ruleTo: pool})}, Nodes: clusterNodes},
			want: "stage kubernetes kubernetes\nfinish kubernetes kubernetes"},
		{name: "detached: finish",
			in:   Input{LoadBalancers: []*armnetwork.LoadBalancer{mkLB(lbSpec{staging: []string{"10.0.0.4"}, ruleTo: stage})}, ScaleSets: []*armcompute.VirtualMachineScaleSet{scaleSet()}, Nodes: clusterNodes},
			want: "finish kubernetes kubernetes"},
		{name: "done", in: Input{LoadBalancers: []*armnetwork.LoadBalancer{mkLB(lbSpec{ipEntries: []string{"10.0.0.4"}, ruleTo: pool})}, Nodes: clusterNodes}},
		{name: "empty NIC pool: nothing to move", in: Input{LoadBalancers: []*armnetwork.LoadBalancer{mkLB(lbSpec{ruleTo: pool})}}},
		{name: "empty pool still in a scale set model: the model only",
			in:   Input{LoadBalancers: []*armnetwork.LoadBalancer{mkLB(lbSpec{ruleTo: pool})}, ScaleSets: []*armcompute.VirtualMachineScaleSet{scaleSet(pool)}},
			want: "detach-models ss -kubernetes"},
		{name: "migrate API: call, then the references it leaves",
			in: Input{UseAPI: true, LoadBalancers: []*armnetwork.LoadBalancer{mkLB(lbSpec{members: members, ruleTo: pool})},
				ScaleSets: []*armcompute.VirtualMachineScaleSet{scaleSet(pool)}, Refs: allRefs, Nodes: clusterNodes},
			want: `migrate-api kubernetes kubernetes
detach-models ss -kubernetes
detach-nodes 0 -kubernetes
detach-nodes vm-a-nic -kubernetes
detach-nodes vm-b-nic -kubernetes`},
		{name: "after the migrate API: stale instance and model references",
			in: Input{UseAPI: true, LoadBalancers: []*armnetwork.LoadBalancer{mkLB(lbSpec{ipEntries: []string{"10.0.0.4", "10.0.0.6"}, ruleTo: pool})},
				ScaleSets: []*armcompute.VirtualMachineScaleSet{scaleSet(pool)}, Refs: map[string][]string{ssIPC(0): {pool}}, Nodes: clusterNodes},
			want: "detach-models ss -kubernetes\ndetach-nodes 0 -kubernetes"},
		{name: "a staged migration finishes even with the API switched on",
			in:   Input{UseAPI: true, LoadBalancers: []*armnetwork.LoadBalancer{mkLB(lbSpec{staging: []string{"10.0.0.4"}, ruleTo: stage})}},
			want: "finish kubernetes kubernetes"},
		{name: "dual-stack: both pools",
			in: Input{LoadBalancers: []*armnetwork.LoadBalancer{mkLB(lbSpec{members: []string{nicIPC("vm-a")}, members6: []string{nicIPC("vm-a")}, ruleTo: pool})},
				Refs: map[string][]string{nicIPC("vm-a"): {pool, pool6}}, Nodes: clusterNodes},
			want: `stage kubernetes kubernetes{vm-a=10.0.0.4} kubernetes-IPv6{vm-a=fd00::4}
detach-nodes vm-a-nic -kubernetes -kubernetes-IPv6
finish kubernetes kubernetes kubernetes-IPv6`},
		{name: "a member that is no node: warned, left out, detached",
			in: Input{LoadBalancers: []*armnetwork.LoadBalancer{mkLB(lbSpec{members: []string{nicIPC("vm-a"), nicIPC("user-vm")}, ruleTo: pool})},
				Refs: map[string][]string{nicIPC("vm-a"): {pool}, nicIPC("user-vm"): {pool}}, Nodes: clusterNodes},
			want: `stage kubernetes kubernetes{vm-a=10.0.0.4}
detach-nodes user-vm-nic -kubernetes
detach-nodes vm-a-nic -kubernetes
finish kubernetes kubernetes`,
			warnings: "members that are no node of the cluster leave it: " + nicIPC("user-vm")},
		{name: "inbound NAT rules on the pool: not migrated",
			in:       Input{LoadBalancers: []*armnetwork.LoadBalancer{mkLB(lbSpec{members: members, ruleTo: pool, natTo: pool})}, Refs: allRefs, Nodes: clusterNodes},
			warnings: "used by inbound NAT rules ssh"},
		{name: "staging pool name too long: not migrated without the API",
			in: Input{ClusterName: strings.Repeat("c", 63), LoadBalancers: []*armnetwork.LoadBalancer{mkLBNamed(strings.Repeat("c", 63)+"-IPv6", lbSpec{members: members})},
				Refs: map[string][]string{}, Nodes: clusterNodes},
			warnings: "longer than Azure's 80 characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.in.ClusterName == "" {
				tc.in.ClusterName = "kubernetes"
			}
			p := Build(tc.in)
			if got := summary(p); got != tc.want {
				t.Fatalf("plan\n%s\nwant\n%s", got, tc.want)
			}
			if w := strings.Join(p.Warnings, "; "); !strings.Contains(w, tc.warnings) || (tc.warnings == "" && w != "") {
				t.Fatalf("warnings %q, want %q", w, tc.warnings)
			}
			if p.Needed() != (tc.want != "") {
				t.Fatal("Needed")
			}
		})
	}
}

func TestRetarget(t *testing.T) {
	lb := mkLB(lbSpec{ruleTo: pool})
	lb.Properties.OutboundRules = []*armnetwork.OutboundRule{{Name: to.Ptr("o"), Properties: &armnetwork.OutboundRulePropertiesFormat{
		BackendAddressPool: &armnetwork.SubResource{ID: to.Ptr(strings.ToUpper(pool))}}}}
	if !Retarget(lb, pool, stage) || *lb.Properties.LoadBalancingRules[0].Properties.BackendAddressPool.ID != stage ||
		*lb.Properties.OutboundRules[0].Properties.BackendAddressPool.ID != stage {
		t.Fatal("not retargeted")
	}
	if Retarget(lb, pool, stage) {
		t.Fatal("second retarget changed something")
	}
}

func TestParsePhase(t *testing.T) {
	for _, p := range Phases() {
		if got, ok := ParsePhase(p.String()); !ok || got != p {
			t.Fatalf("%s", p)
		}
	}
}
