package compute

import (
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// instancePools sets the pools of an instance's first ip configuration and
// sends the CCM's partial-body update with If-Match.
func (v *env) instancePools(ss, id string, ifMatch *string, pools ...string) (armcompute.VirtualMachineScaleSetVM, error) {
	v.t.Helper()
	vmc := v.comp.NewVirtualMachineScaleSetVMsClient()
	inst, err := vmc.Get(v.ctx, rg, ss, id, nil)
	v.must(err, "get instance")
	cfg := inst.Properties.NetworkProfileConfiguration
	var refs []*armcompute.SubResource
	for _, p := range pools {
		refs = append(refs, &armcompute.SubResource{ID: to.Ptr(p)})
	}
	cfg.NetworkInterfaceConfigurations[0].Properties.IPConfigurations[0].Properties.LoadBalancerBackendAddressPools = refs
	if ifMatch == nil {
		ifMatch = inst.Etag
	}
	p, err := vmc.BeginUpdate(v.ctx, rg, ss, id, armcompute.VirtualMachineScaleSetVM{Location: to.Ptr(loc), Etag: inst.Etag,
		Properties: &armcompute.VirtualMachineScaleSetVMProperties{NetworkProfileConfiguration: cfg}},
		&armcompute.VirtualMachineScaleSetVMsClientBeginUpdateOptions{IfMatch: ifMatch})
	if err != nil {
		return armcompute.VirtualMachineScaleSetVM{}, err
	}
	r, err := p.PollUntilDone(v.ctx, fastPoll)
	return r.VirtualMachineScaleSetVM, err
}

func (v *env) lbEtag(name string) string {
	v.t.Helper()
	r, err := v.net.NewLoadBalancersClient().Get(v.ctx, rg, name, nil)
	v.must(err, "get lb")
	return *r.Etag
}

func nicViewPools(nic armnetwork.Interface) []string {
	var out []string
	for _, p := range nic.Properties.IPConfigurations[0].Properties.LoadBalancerBackendAddressPools {
		out = append(out, strings.ToLower(*p.ID))
	}
	return out
}

// Scale set instances join and leave pools through per-instance updates and
// model updates (PUT and PATCH); the pool's back-references, the instance's
// NIC view and the etags follow.
func TestScaleSetPoolMembership(t *testing.T) {
	v := newEnv(t, arm.Config{})
	pool := v.lb("kubernetes")
	v.putScaleSet("vmss", v.scaleSet(2, nil, false), nil)
	nics := v.net.NewInterfacesClient()

	// Join with the current etag: member, NIC view, new LB etag.
	before := v.lbEtag("kubernetes")
	inst, err := v.instancePools("vmss", "0", nil, pool)
	v.must(err, "join")
	want := strings.ToLower(*inst.ID + "/networkInterfaces/nic/ipConfigurations/ipconfig1")
	if got := v.poolMembers("kubernetes"); len(got) != 1 || strings.ToLower(got[0]) != want {
		t.Fatalf("members %v, want [%s]", got, want)
	}
	if v.lbEtag("kubernetes") == before {
		t.Error("LB etag not renewed by a scale set member joining")
	}
	view, err := nics.GetVirtualMachineScaleSetNetworkInterface(v.ctx, rg, "vmss", "0", "nic", nil)
	v.must(err, "nic view")
	if got := nicViewPools(view.Interface); len(got) != 1 || got[0] != strings.ToLower(pool) {
		t.Errorf("NIC view pools %v", got)
	}
	// The etag the update returned is current; an unknown one is refused (412).
	_, err = v.instancePools("vmss", "0", inst.Etag, pool)
	v.must(err, "same etag right after the update")
	_, err = v.instancePools("vmss", "0", to.Ptr(`"1"`))
	wantStatus(t, err, http.StatusPreconditionFailed, "PreconditionFailed")
	if got := v.poolMembers("kubernetes"); len(got) != 1 {
		t.Fatalf("a refused update changed the pool: %v", got)
	}
	// Leave: the member goes, the NIC view has no pools.
	_, err = v.instancePools("vmss", "0", nil)
	v.must(err, "leave")
	if got := v.poolMembers("kubernetes"); len(got) != 0 {
		t.Fatalf("members after leaving %v", got)
	}
	view, err = nics.GetVirtualMachineScaleSetNetworkInterface(v.ctx, rg, "vmss", "0", "nic", nil)
	v.must(err, "nic view")
	if got := nicViewPools(view.Interface); len(got) != 0 {
		t.Errorf("NIC view pools after leaving %v", got)
	}

	// Model update through PATCH (BeginUpdate) with the pool, then manualupgrade.
	ssc := v.comp.NewVirtualMachineScaleSetsClient()
	cur, err := ssc.Get(v.ctx, rg, "vmss", nil)
	v.must(err, "get vmss")
	model := v.scaleSet(0, nil, false, pool).Properties.VirtualMachineProfile.NetworkProfile
	var upd armcompute.VirtualMachineScaleSetUpdateNetworkProfile
	for _, n := range model.NetworkInterfaceConfigurations {
		ipc := n.Properties.IPConfigurations[0]
		upd.NetworkInterfaceConfigurations = append(upd.NetworkInterfaceConfigurations, &armcompute.VirtualMachineScaleSetUpdateNetworkConfiguration{
			Name: n.Name, Properties: &armcompute.VirtualMachineScaleSetUpdateNetworkConfigurationProperties{Primary: n.Properties.Primary,
				IPConfigurations: []*armcompute.VirtualMachineScaleSetUpdateIPConfiguration{{Name: ipc.Name,
					Properties: &armcompute.VirtualMachineScaleSetUpdateIPConfigurationProperties{Primary: ipc.Properties.Primary,
						Subnet: ipc.Properties.Subnet, LoadBalancerBackendAddressPools: ipc.Properties.LoadBalancerBackendAddressPools}}}}})
	}
	patch := armcompute.VirtualMachineScaleSetUpdate{Properties: &armcompute.VirtualMachineScaleSetUpdateProperties{
		VirtualMachineProfile: &armcompute.VirtualMachineScaleSetUpdateVMProfile{NetworkProfile: &upd}}}
	_, err = ssc.BeginUpdate(v.ctx, rg, "vmss", patch, &armcompute.VirtualMachineScaleSetsClientBeginUpdateOptions{IfMatch: to.Ptr(`"999"`)})
	wantStatus(t, err, http.StatusPreconditionFailed, "PreconditionFailed")
	pp, err := ssc.BeginUpdate(v.ctx, rg, "vmss", patch, &armcompute.VirtualMachineScaleSetsClientBeginUpdateOptions{IfMatch: cur.Etag})
	v.must(err, "patch model")
	patched, err := pp.PollUntilDone(v.ctx, fastPoll)
	v.must(err, "patch model")
	if *patched.SKU.Capacity != 2 || *patched.Etag == *cur.Etag ||
		len(patched.Properties.VirtualMachineProfile.NetworkProfile.NetworkInterfaceConfigurations[0].Properties.IPConfigurations[0].Properties.LoadBalancerBackendAddressPools) != 1 {
		t.Fatalf("patched model: capacity %d etag %s", *patched.SKU.Capacity, *patched.Etag)
	}
	if got := v.poolMembers("kubernetes"); len(got) != 0 {
		t.Fatalf("model change must not reach instances before an upgrade: %v", got)
	}
	up, err := ssc.BeginUpdateInstances(v.ctx, rg, "vmss", armcompute.VirtualMachineScaleSetVMInstanceRequiredIDs{InstanceIDs: []*string{to.Ptr("0"), to.Ptr("1")}}, nil)
	v.must(err, "manualupgrade")
	_, err = up.PollUntilDone(v.ctx, fastPoll)
	v.must(err, "manualupgrade")
	if got := v.poolMembers("kubernetes"); len(got) != 2 {
		t.Fatalf("members after upgrade %v", got)
	}
	view, err = nics.GetVirtualMachineScaleSetNetworkInterface(v.ctx, rg, "vmss", "1", "nic", nil)
	v.must(err, "nic view")
	if got := nicViewPools(view.Interface); len(got) != 1 {
		t.Errorf("NIC view of instance 1 after upgrade %v", got)
	}
	// Deleting the LB while scale set instances use its pool fails as in Azure.
	dp, err := v.net.NewLoadBalancersClient().BeginDelete(v.ctx, rg, "kubernetes", nil)
	if err == nil {
		_, err = dp.PollUntilDone(v.ctx, fastPoll)
	}
	wantStatus(t, err, http.StatusBadRequest, "LoadBalancerInUseByVirtualMachineScaleSet")
}
