package membership

import (
	"fmt"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

const (
	sub    = "/subscriptions/s/resourceGroups/rg"
	pool4  = sub + "/providers/Microsoft.Network/loadBalancers/kubernetes/backendAddressPools/kubernetes"
	pool6  = sub + "/providers/Microsoft.Network/loadBalancers/kubernetes/backendAddressPools/kubernetes-IPv6"
	other  = sub + "/providers/Microsoft.Network/loadBalancers/other/backendAddressPools/other"
	nicA   = sub + "/providers/Microsoft.Network/networkInterfaces/vm-a-nic"
	nicB   = sub + "/providers/Microsoft.Network/networkInterfaces/vm-b-nic"
	ssVM0  = sub + "/providers/Microsoft.Compute/virtualMachineScaleSets/pool/virtualMachines/0"
	cfgA   = nicA + "/ipConfigurations/ipconfig1"
	cfgA6  = nicA + "/ipConfigurations/ipconfig-v6"
	cfgB   = nicB + "/ipConfigurations/ipconfig1"
	cfgSS0 = ssVM0 + "/networkInterfaces/pool-nic/ipConfigurations/pool-ip"
)

func TestParseIPConfigID(t *testing.T) {
	for _, tc := range []struct {
		id                          string
		kind                        Kind
		owner, rg, ss, inst, n, cfg string
		err                         bool
	}{
		{id: cfgA, kind: KindNIC, owner: nicA, rg: "rg", n: "vm-a-nic", cfg: "ipconfig1"},
		{id: cfgSS0, kind: KindScaleSetVM, owner: ssVM0, rg: "rg", ss: "pool", inst: "0", n: "pool-nic", cfg: "pool-ip"},
		{id: strings.ToUpper(cfgB), kind: KindNIC, owner: strings.ToUpper(nicB), rg: "RG", n: "VM-B-NIC", cfg: "IPCONFIG1"},
		{id: nicA, err: true},
		{id: sub + "/providers/Microsoft.Network/applicationGateways/gw/ipConfigurations/x", err: true},
		{id: cfgA + "/extra", err: true},
		{id: "", err: true},
		// What the SDK's lenient parser would accept under other names.
		{id: cfgA + "/", err: true},
		{id: strings.Replace(cfgA, "/ipConfigurations/", "//ipConfigurations/", 1), err: true},
		{id: "/providers/Microsoft.Compute/virtualMachineScaleSets/0/virtualMachines/0/networkInterfaces/0/ipConfigurations", err: true},
		{id: strings.TrimPrefix(cfgA, "/"), err: true},
	} {
		r, err := ParseIPConfigID(tc.id)
		if tc.err {
			if err == nil {
				t.Errorf("%q: want error, got %+v", tc.id, r)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.id, err)
			continue
		}
		if r.Kind != tc.kind || r.Owner != tc.owner || r.ResourceGroup != tc.rg || r.ScaleSet != tc.ss || r.InstanceID != tc.inst ||
			r.NIC != tc.n || r.IPConfig != tc.cfg {
			t.Errorf("%q: got %+v", tc.id, r)
		}
	}
}

func render(edits []Edit) string {
	var b strings.Builder
	for _, e := range edits {
		fmt.Fprintf(&b, "%s %s:", e.Kind, e.Owner[strings.LastIndex(e.Owner, "/")+1:])
		for _, c := range e.Changes {
			op := "-"
			if c.Add {
				op = "+"
			}
			fmt.Fprintf(&b, " %s%s/%s@%s", op, c.NIC, c.IPConfig, c.PoolID[strings.LastIndex(c.PoolID, "/")+1:])
		}
		b.WriteString(";")
	}
	return b.String()
}

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pools   []Pool
		remove  bool
		want    string
		skipped int
	}{
		{name: "nothing to do", pools: []Pool{{ID: pool4, Want: []string{cfgA, cfgB}, Current: []string{cfgB, cfgA}}}, remove: true, want: ""},
		{name: "case-insensitive IDs are equal", pools: []Pool{{ID: pool4, Want: []string{cfgA}, Current: []string{strings.ToUpper(cfgA)}}}, remove: true, want: ""},
		{name: "join", pools: []Pool{{ID: pool4, Want: []string{cfgA, cfgSS0}}}, remove: true,
			want: "scaleSetVM 0: +pool-nic/pool-ip@kubernetes;nic vm-a-nic: +vm-a-nic/ipconfig1@kubernetes;"},
		{name: "leave", pools: []Pool{{ID: pool4, Want: []string{cfgA}, Current: []string{cfgA, cfgB}}}, remove: true,
			want: "nic vm-b-nic: -vm-b-nic/ipconfig1@kubernetes;"},
		{name: "no removal when resolution was incomplete", pools: []Pool{{ID: pool4, Want: []string{cfgA}, Current: []string{cfgB}}}, remove: false,
			want: "nic vm-a-nic: +vm-a-nic/ipconfig1@kubernetes;"},
		{name: "dual-stack: both pools of one NIC in one edit",
			pools:  []Pool{{ID: pool4, Want: []string{cfgA}}, {ID: pool6, Want: []string{cfgA6}}},
			remove: true, want: "nic vm-a-nic: +vm-a-nic/ipconfig1@kubernetes +vm-a-nic/ipconfig-v6@kubernetes-IPv6;"},
		{name: "unknown member kinds are skipped", pools: []Pool{{ID: pool4, Current: []string{"/subscriptions/s/whatever"}}}, remove: true,
			want: "", skipped: 1},
		{name: "kept members are neither added nor removed",
			pools:  []Pool{{ID: pool4, Want: []string{cfgA}, Current: []string{cfgB}, Keep: []string{cfgB, cfgSS0}}},
			remove: true, want: "nic vm-a-nic: +vm-a-nic/ipconfig1@kubernetes;"},
		{name: "duplicates collapse", pools: []Pool{{ID: pool4, Want: []string{cfgA, cfgA}}}, remove: true,
			want: "nic vm-a-nic: +vm-a-nic/ipconfig1@kubernetes;"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			edits, skipped := Plan(tc.pools, tc.remove)
			if got := render(edits); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			if len(skipped) != tc.skipped {
				t.Errorf("skipped %v", skipped)
			}
		})
	}
}

func nic(pools ...string) *armnetwork.Interface {
	refs := func(ids []string) []*armnetwork.BackendAddressPool {
		var out []*armnetwork.BackendAddressPool
		for _, id := range ids {
			out = append(out, &armnetwork.BackendAddressPool{ID: to.Ptr(id)})
		}
		return out
	}
	return &armnetwork.Interface{ID: to.Ptr(nicA), Properties: &armnetwork.InterfacePropertiesFormat{
		IPConfigurations: []*armnetwork.InterfaceIPConfiguration{
			{Name: to.Ptr("ipconfig1"), Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{
				Primary: to.Ptr(true), LoadBalancerBackendAddressPools: refs(pools)}},
			{Name: to.Ptr("ipconfig-v6"), Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{}},
		}}}
}

func nicPools(n *armnetwork.Interface, cfg int) string {
	var out []string
	for _, p := range n.Properties.IPConfigurations[cfg].Properties.LoadBalancerBackendAddressPools {
		out = append(out, (*p.ID)[strings.LastIndex(*p.ID, "/")+1:])
	}
	return strings.Join(out, ",")
}

func TestApplyToNIC(t *testing.T) {
	add := func(p string) Change { return Change{NIC: "vm-a-nic", IPConfig: "ipconfig1", PoolID: p, Add: true} }
	del := func(p string) Change { return Change{NIC: "vm-a-nic", IPConfig: "ipconfig1", PoolID: p} }
	for _, tc := range []struct {
		name    string
		start   []string
		changes []Change
		want    string
		changed bool
		err     bool
	}{
		{name: "add keeps other pools", start: []string{other}, changes: []Change{add(pool4)}, want: "other,kubernetes", changed: true},
		{name: "add present is a no-op", start: []string{strings.ToUpper(pool4)}, changes: []Change{add(pool4)}, want: "KUBERNETES"},
		{name: "remove keeps other pools", start: []string{other, pool4}, changes: []Change{del(pool4)}, want: "other", changed: true},
		{name: "remove absent is a no-op", start: []string{other}, changes: []Change{del(pool4)}, want: "other"},
		{name: "add to a missing ip configuration fails", changes: []Change{{NIC: "vm-a-nic", IPConfig: "nope", PoolID: pool4, Add: true}}, err: true},
		{name: "remove from a missing ip configuration is a no-op", changes: []Change{{NIC: "vm-a-nic", IPConfig: "nope", PoolID: pool4}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := nic(tc.start...)
			changed, err := ApplyToNIC(n, tc.changes)
			if (err != nil) != tc.err {
				t.Fatalf("err %v", err)
			}
			if tc.err {
				return
			}
			if changed != tc.changed || nicPools(n, 0) != tc.want || nicPools(n, 1) != "" {
				t.Fatalf("changed=%v pools=%q (v6 %q)", changed, nicPools(n, 0), nicPools(n, 1))
			}
		})
	}
	// The IPv6 configuration joins the IPv6 pool only.
	n := nic()
	if ch, err := ApplyToNIC(n, []Change{{NIC: "vm-a-nic", IPConfig: "ipconfig-v6", PoolID: pool6, Add: true}}); err != nil || !ch ||
		nicPools(n, 1) != "kubernetes-IPv6" || nicPools(n, 0) != "" {
		t.Fatalf("v6: %v %v %q %q", ch, err, nicPools(n, 0), nicPools(n, 1))
	}
}

func ssIPConfig(name string, primary, v6 bool, pools ...string) *armcompute.VirtualMachineScaleSetIPConfiguration {
	p := &armcompute.VirtualMachineScaleSetIPConfigurationProperties{Primary: to.Ptr(primary)}
	if v6 {
		p.PrivateIPAddressVersion = to.Ptr(armcompute.IPVersionIPv6)
	}
	for _, id := range pools {
		p.LoadBalancerBackendAddressPools = append(p.LoadBalancerBackendAddressPools, &armcompute.SubResource{ID: to.Ptr(id)})
	}
	return &armcompute.VirtualMachineScaleSetIPConfiguration{Name: to.Ptr(name), Properties: p}
}

func ssPools(ic *armcompute.VirtualMachineScaleSetIPConfiguration) string {
	var out []string
	for _, p := range ic.Properties.LoadBalancerBackendAddressPools {
		out = append(out, (*p.ID)[strings.LastIndex(*p.ID, "/")+1:])
	}
	return strings.Join(out, ",")
}

func TestApplyToScaleSetVM(t *testing.T) {
	v4 := ssIPConfig("pool-ip", true, false, other)
	v6 := ssIPConfig("pool-ip-v6", false, true)
	vm := &armcompute.VirtualMachineScaleSetVM{ID: to.Ptr(ssVM0), Properties: &armcompute.VirtualMachineScaleSetVMProperties{
		NetworkProfileConfiguration: &armcompute.VirtualMachineScaleSetVMNetworkProfileConfiguration{
			NetworkInterfaceConfigurations: []*armcompute.VirtualMachineScaleSetNetworkConfiguration{{Name: to.Ptr("pool-nic"),
				Properties: &armcompute.VirtualMachineScaleSetNetworkConfigurationProperties{
					IPConfigurations: []*armcompute.VirtualMachineScaleSetIPConfiguration{v4, v6}}}}}}}
	ch, err := ApplyToScaleSetVM(vm, []Change{{NIC: "pool-nic", IPConfig: "pool-ip", PoolID: pool4, Add: true},
		{NIC: "pool-nic", IPConfig: "pool-ip-v6", PoolID: pool6, Add: true}})
	if err != nil || !ch || ssPools(v4) != "other,kubernetes" || ssPools(v6) != "kubernetes-IPv6" {
		t.Fatalf("add: %v %v %q %q", ch, err, ssPools(v4), ssPools(v6))
	}
	if ch, err := ApplyToScaleSetVM(vm, []Change{{NIC: "pool-nic", IPConfig: "pool-ip", PoolID: pool4, Add: true}}); err != nil || ch {
		t.Fatalf("re-add changed: %v %v", ch, err)
	}
	if ch, err := ApplyToScaleSetVM(vm, []Change{{NIC: "pool-nic", IPConfig: "pool-ip", PoolID: pool4}}); err != nil || !ch || ssPools(v4) != "other" {
		t.Fatalf("remove: %v %v %q", ch, err, ssPools(v4))
	}
	if _, err := ApplyToScaleSetVM(vm, []Change{{NIC: "other-nic", IPConfig: "pool-ip", PoolID: pool4, Add: true}}); err == nil {
		t.Fatal("adding to a missing NIC configuration must fail")
	}
}

func TestScaleSetModel(t *testing.T) {
	mk := func() (*armcompute.VirtualMachineScaleSet, []*armcompute.VirtualMachineScaleSetIPConfiguration) {
		cfgs := []*armcompute.VirtualMachineScaleSetIPConfiguration{ssIPConfig("secondary", false, false),
			ssIPConfig("primary", true, false, other), ssIPConfig("v6", false, true)}
		return &armcompute.VirtualMachineScaleSet{Properties: &armcompute.VirtualMachineScaleSetProperties{
			VirtualMachineProfile: &armcompute.VirtualMachineScaleSetVMProfile{NetworkProfile: &armcompute.VirtualMachineScaleSetNetworkProfile{
				NetworkInterfaceConfigurations: []*armcompute.VirtualMachineScaleSetNetworkConfiguration{
					{Name: to.Ptr("secondary-nic"), Properties: &armcompute.VirtualMachineScaleSetNetworkConfigurationProperties{Primary: to.Ptr(false),
						IPConfigurations: []*armcompute.VirtualMachineScaleSetIPConfiguration{ssIPConfig("x", true, false)}}},
					{Name: to.Ptr("nic"), Properties: &armcompute.VirtualMachineScaleSetNetworkConfigurationProperties{Primary: to.Ptr(true),
						IPConfigurations: cfgs}}}}}}}, cfgs
	}
	ss, cfgs := mk()
	if ModelHasPool(ss, pool4) || !ModelHasPool(ss, strings.ToUpper(other)) {
		t.Fatal("ModelHasPool")
	}
	if !AddModelPool(ss, pool4, false) || ssPools(cfgs[1]) != "other,kubernetes" || ssPools(cfgs[0]) != "" {
		t.Fatalf("IPv4 goes to the primary ip configuration of the primary NIC: %q %q", ssPools(cfgs[0]), ssPools(cfgs[1]))
	}
	if AddModelPool(ss, pool4, false) {
		t.Fatal("second add changed the model")
	}
	if !AddModelPool(ss, pool6, true) || ssPools(cfgs[2]) != "kubernetes-IPv6" {
		t.Fatalf("IPv6: %q", ssPools(cfgs[2]))
	}
	if !RemoveModelPool(ss, pool4) || ssPools(cfgs[1]) != "other" || RemoveModelPool(ss, pool4) {
		t.Fatalf("remove: %q", ssPools(cfgs[1]))
	}
	// No NIC configuration (a Flexible scale set without a VM profile): left alone.
	if AddModelPool(&armcompute.VirtualMachineScaleSet{}, pool4, false) {
		t.Fatal("model without profile changed")
	}
	// No IPv6 configuration: no IPv6 pool.
	ss2, _ := mk()
	ss2.Properties.VirtualMachineProfile.NetworkProfile.NetworkInterfaceConfigurations[1].Properties.IPConfigurations = cfgs[:2]
	if AddModelPool(ss2, pool6, true) {
		t.Fatal("IPv6 pool added to a model without IPv6 configuration")
	}
}
