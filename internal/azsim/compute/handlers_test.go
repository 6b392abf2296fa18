package compute

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

func TestAvailabilitySetVMAndNIC(t *testing.T) {
	v := newEnv(t, arm.Config{})
	asc := v.comp.NewAvailabilitySetsClient()
	as, err := asc.CreateOrUpdate(v.ctx, rg, "as1", armcompute.AvailabilitySet{
		Location:   to.Ptr(loc),
		SKU:        &armcompute.SKU{Name: to.Ptr("Aligned")},
		Properties: &armcompute.AvailabilitySetProperties{PlatformFaultDomainCount: to.Ptr[int32](2)},
	}, nil)
	v.must(err, "create availability set")
	if *as.Properties.PlatformUpdateDomainCount != 5 {
		t.Errorf("update domain default: %d", *as.Properties.PlatformUpdateDomainCount)
	}
	nic1, nic2 := v.nic("vm1-nic"), v.nic("vm2-nic")
	vms := v.comp.NewVirtualMachinesClient()
	mkVM := func(nicID string) armcompute.VirtualMachine {
		return armcompute.VirtualMachine{
			Location: to.Ptr(loc),
			Properties: &armcompute.VirtualMachineProperties{
				HardwareProfile: &armcompute.HardwareProfile{VMSize: to.Ptr(armcompute.VirtualMachineSizeTypesStandardD2SV3)},
				AvailabilitySet: &armcompute.SubResource{ID: as.ID},
				NetworkProfile:  &armcompute.NetworkProfile{NetworkInterfaces: []*armcompute.NetworkInterfaceReference{{ID: to.Ptr(nicID)}}},
			},
		}
	}
	for i, nic := range []string{*nic1.ID, *nic2.ID} {
		name := []string{"vm1", "vm2"}[i]
		p, err := vms.BeginCreateOrUpdate(v.ctx, rg, name, mkVM(nic), nil)
		v.must(err, "create vm")
		r, err := p.PollUntilDone(v.ctx, fastPoll)
		v.must(err, "create vm")
		if *r.Properties.OSProfile.ComputerName != name || r.Properties.InstanceView != nil {
			t.Errorf("vm %s: computerName %v, instanceView without $expand: %v", name, *r.Properties.OSProfile.ComputerName, r.Properties.InstanceView)
		}
		// CRP answers the create with "1"; the VM reads "2" once created.
		if r.Etag == nil || *r.Etag != `"2"` {
			t.Errorf("vm %s etag %v, want \"2\"", name, r.Etag)
		}
	}

	// Back-references: availability set → VMs, NIC → VM.
	got, err := asc.Get(v.ctx, rg, "as1", nil)
	v.must(err, "get availability set")
	if len(got.Properties.VirtualMachines) != 2 {
		t.Errorf("availability set virtualMachines: %d", len(got.Properties.VirtualMachines))
	}
	n, err := v.net.NewInterfacesClient().Get(v.ctx, rg, "vm1-nic", nil)
	v.must(err, "get nic")
	if n.Properties.VirtualMachine == nil || !strings.HasSuffix(*n.Properties.VirtualMachine.ID, "/virtualMachines/vm1") {
		t.Errorf("nic virtualMachine back-reference: %+v", n.Properties.VirtualMachine)
	}

	// Instance view: fault domains spread over the set, power state running.
	for i, name := range []string{"vm1", "vm2"} {
		r, err := vms.Get(v.ctx, rg, name, &armcompute.VirtualMachinesClientGetOptions{Expand: to.Ptr(armcompute.InstanceViewTypesInstanceView)})
		v.must(err, "get vm")
		iv := r.Properties.InstanceView
		if iv == nil || powerState(iv.Statuses) != "running" || int(*iv.PlatformFaultDomain) != i {
			t.Errorf("%s instance view: %+v", name, iv)
		}
		ivr, err := vms.InstanceView(v.ctx, rg, name, nil)
		v.must(err, "instanceView")
		if powerState(ivr.Statuses) != "running" || int(*ivr.PlatformUpdateDomain) != i {
			t.Errorf("%s /instanceView: %+v", name, ivr.VirtualMachineInstanceView)
		}
	}

	// A VM on a missing NIC, or on a NIC another VM uses, is refused.
	_, err = vms.BeginCreateOrUpdate(v.ctx, rg, "vm3", mkVM(strings.Replace(*nic1.ID, "vm1-nic", "nope", 1)), nil)
	wantStatus(t, err, http.StatusNotFound, "NotFound")
	_, err = vms.BeginCreateOrUpdate(v.ctx, rg, "vm3", mkVM(*nic1.ID), nil)
	wantStatus(t, err, http.StatusBadRequest, "NicInUse")
	_, err = vms.BeginCreateOrUpdate(v.ctx, rg, "vm3", armcompute.VirtualMachine{Location: to.Ptr(loc), Zones: []*string{to.Ptr("7")}}, nil)
	wantStatus(t, err, http.StatusBadRequest, "InvalidParameter")

	// Stale If-Match → 412; the current etag goes through with merge semantics.
	cur, err := vms.Get(v.ctx, rg, "vm1", nil)
	v.must(err, "get vm1")
	upd := armcompute.VirtualMachine{Location: to.Ptr(loc), Tags: map[string]*string{"k": to.Ptr("v")}}
	_, err = vms.BeginCreateOrUpdate(v.ctx, rg, "vm1", upd, &armcompute.VirtualMachinesClientBeginCreateOrUpdateOptions{IfMatch: to.Ptr(`"0"`)})
	wantStatus(t, err, http.StatusPreconditionFailed, "PreconditionFailed")
	p, err := vms.BeginCreateOrUpdate(v.ctx, rg, "vm1", upd, &armcompute.VirtualMachinesClientBeginCreateOrUpdateOptions{IfMatch: cur.Etag})
	v.must(err, "update vm1")
	r, err := p.PollUntilDone(v.ctx, fastPoll)
	v.must(err, "update vm1")
	if *r.Tags["k"] != "v" || r.Properties.AvailabilitySet == nil || len(r.Properties.NetworkProfile.NetworkInterfaces) != 1 || *r.Etag != `"3"` {
		t.Errorf("merge update lost fields or etag not bumped: %+v etag %s", r.Properties, *r.Etag)
	}

	// DELETE leaves the NIC, and clears the back-references.
	dp, err := vms.BeginDelete(v.ctx, rg, "vm1", nil)
	v.must(err, "delete vm1")
	_, err = dp.PollUntilDone(v.ctx, fastPoll)
	v.must(err, "delete vm1")
	n, err = v.net.NewInterfacesClient().Get(v.ctx, rg, "vm1-nic", nil)
	v.must(err, "nic after vm delete")
	if n.Properties.VirtualMachine != nil {
		t.Errorf("nic still points at deleted vm: %v", *n.Properties.VirtualMachine.ID)
	}
	got, err = asc.Get(v.ctx, rg, "as1", nil)
	v.must(err, "get availability set")
	if len(got.Properties.VirtualMachines) != 1 {
		t.Errorf("availability set after delete: %d VMs", len(got.Properties.VirtualMachines))
	}
	_, err = vms.Get(v.ctx, rg, "vm1", nil)
	wantStatus(t, err, http.StatusNotFound, "ResourceNotFound")
}

func TestUniformScaleSet(t *testing.T) {
	v := newEnv(t, arm.Config{PageSize: 2})
	ssc := v.comp.NewVirtualMachineScaleSetsClient()
	vmc := v.comp.NewVirtualMachineScaleSetVMsClient()
	ss := v.putScaleSet("vmss", v.scaleSet(5, []string{"1", "2", "3"}, false), nil)
	if *ss.SKU.Capacity != 5 || ss.Etag == nil {
		t.Fatalf("scale set: %+v", ss)
	}

	vms, pages := v.instances("vmss", true)
	if len(vms) != 5 || pages != 3 {
		t.Fatalf("instances %d over %d pages, want 5 over 3", len(vms), pages)
	}
	zones := map[string]int{}
	names := map[string]bool{}
	for _, vm := range vms {
		zones[*vm.Zones[0]]++
		names[*vm.Properties.OSProfile.ComputerName] = true
		if !strings.HasPrefix(*vm.Name, "vmss_") || vm.Properties.InstanceView == nil || powerState(vm.Properties.InstanceView.Statuses) != "running" {
			t.Errorf("instance %s: %+v", *vm.Name, vm.Properties.InstanceView)
		}
		if len(vm.Properties.NetworkProfile.NetworkInterfaces) != 1 ||
			!strings.HasSuffix(*vm.Properties.NetworkProfile.NetworkInterfaces[0].ID, "/virtualMachines/"+*vm.InstanceID+"/networkInterfaces/nic") {
			t.Errorf("instance %s network profile: %+v", *vm.Name, vm.Properties.NetworkProfile)
		}
	}
	if zones["1"] != 2 || zones["2"] != 2 || zones["3"] != 1 {
		t.Errorf("zone spread: %v", zones)
	}
	for _, want := range []string{"aks-pool-vmss000000", "aks-pool-vmss000004"} {
		if !names[want] {
			t.Errorf("computer name %s missing from %v", want, names)
		}
	}
	plain, _ := v.instances("vmss", false)
	if plain[0].Properties.InstanceView != nil {
		t.Error("instance view returned without $expand")
	}

	// NIC views through the Network API (2018-10-01, microsoft.Compute).
	nics := v.net.NewInterfacesClient()
	nic, err := nics.GetVirtualMachineScaleSetNetworkInterface(v.ctx, rg, "vmss", "3", "nic", nil)
	v.must(err, "get vmss nic")
	ip := nic.Properties.IPConfigurations[0].Properties.PrivateIPAddress
	if ip == nil || !strings.HasPrefix(*ip, "10.0.0.") {
		t.Errorf("vmss nic private ip: %v", ip)
	}
	var all int
	pager := nics.NewListVirtualMachineScaleSetNetworkInterfacesPager(rg, "vmss", nil)
	seen := map[string]bool{}
	for pager.More() {
		page, err := pager.NextPage(v.ctx)
		v.must(err, "list vmss nics")
		for _, n := range page.Value {
			all++
			seen[*n.Properties.IPConfigurations[0].Properties.PrivateIPAddress] = true
		}
	}
	if all != 5 || len(seen) != 5 {
		t.Errorf("vmss nics: %d with %d distinct IPs", all, len(seen))
	}

	// Partial-body instance PUT (what the CCM sends) joins a pool.
	pool := v.lb("kubernetes")
	inst, err := vmc.Get(v.ctx, rg, "vmss", "3", nil)
	v.must(err, "get instance")
	cfg := inst.Properties.NetworkProfileConfiguration
	cfg.NetworkInterfaceConfigurations[0].Properties.IPConfigurations[0].Properties.LoadBalancerBackendAddressPools = []*armcompute.SubResource{{ID: to.Ptr(pool)}}
	partial := armcompute.VirtualMachineScaleSetVM{
		Location: to.Ptr(loc),
		Etag:     inst.Etag,
		Properties: &armcompute.VirtualMachineScaleSetVMProperties{
			HardwareProfile:             &armcompute.HardwareProfile{VMSize: to.Ptr(armcompute.VirtualMachineSizeTypesStandardD2SV3)},
			NetworkProfileConfiguration: cfg,
		},
	}
	_, err = vmc.BeginUpdate(v.ctx, rg, "vmss", "3", partial, &armcompute.VirtualMachineScaleSetVMsClientBeginUpdateOptions{IfMatch: to.Ptr(`"99"`)})
	wantStatus(t, err, http.StatusPreconditionFailed, "PreconditionFailed")
	up, err := vmc.BeginUpdate(v.ctx, rg, "vmss", "3", partial, &armcompute.VirtualMachineScaleSetVMsClientBeginUpdateOptions{IfMatch: inst.Etag})
	v.must(err, "update instance")
	updated, err := up.PollUntilDone(v.ctx, fastPoll)
	v.must(err, "update instance")
	if *updated.Properties.OSProfile.ComputerName != "aks-pool-vmss000003" || *updated.Zones[0] != *inst.Zones[0] || *updated.Name != "vmss_3" {
		t.Errorf("partial PUT lost identity: %s %v %s", *updated.Properties.OSProfile.ComputerName, updated.Zones, *updated.Name)
	}
	members := v.poolMembers("kubernetes")
	want := *inst.ID + "/networkInterfaces/nic/ipConfigurations/ipconfig1"
	if len(members) != 1 || !strings.EqualFold(members[0], want) {
		t.Errorf("pool members %v, want [%s]", members, want)
	}
	nic2, err := nics.GetVirtualMachineScaleSetNetworkInterface(v.ctx, rg, "vmss", "3", "nic", nil)
	v.must(err, "get vmss nic")
	if got := nic2.Properties.IPConfigurations[0].Properties; len(got.LoadBalancerBackendAddressPools) != 1 || *got.PrivateIPAddress != *ip {
		t.Errorf("nic view after join: pools %v ip %v (was %s)", got.LoadBalancerBackendAddressPools, *got.PrivateIPAddress, *ip)
	}
	// A reference to a pool that does not exist is refused.
	cfg.NetworkInterfaceConfigurations[0].Properties.IPConfigurations[0].Properties.LoadBalancerBackendAddressPools = []*armcompute.SubResource{{ID: to.Ptr(pool + "x")}}
	_, err = vmc.BeginUpdate(v.ctx, rg, "vmss", "3", partial, nil)
	wantStatus(t, err, http.StatusBadRequest, "InvalidResourceReference")

	// Model update with a partial body keeps capacity and marks instances stale;
	// manualupgrade applies the model and moves the rest into the pool.
	model := v.scaleSet(0, nil, false, pool).Properties.VirtualMachineProfile.NetworkProfile
	cur, err := ssc.Get(v.ctx, rg, "vmss", nil)
	v.must(err, "get vmss")
	ss = v.putScaleSet("vmss", armcompute.VirtualMachineScaleSet{
		Location: to.Ptr(loc), Etag: cur.Etag,
		Properties: &armcompute.VirtualMachineScaleSetProperties{VirtualMachineProfile: &armcompute.VirtualMachineScaleSetVMProfile{NetworkProfile: model}},
	}, &armcompute.VirtualMachineScaleSetsClientBeginCreateOrUpdateOptions{IfMatch: cur.Etag})
	if *ss.SKU.Capacity != 5 || *ss.Properties.VirtualMachineProfile.OSProfile.ComputerNamePrefix != "aks-pool-vmss" {
		t.Errorf("partial scale set PUT lost fields: %+v", ss.SKU)
	}
	if *ss.Etag == *cur.Etag {
		t.Error("scale set etag not renewed")
	}
	_, err = ssc.BeginCreateOrUpdate(v.ctx, rg, "vmss", ss, &armcompute.VirtualMachineScaleSetsClientBeginCreateOrUpdateOptions{IfMatch: cur.Etag})
	wantStatus(t, err, http.StatusPreconditionFailed, "PreconditionFailed")
	stale, err := vmc.Get(v.ctx, rg, "vmss", "0", nil)
	v.must(err, "get instance 0")
	if *stale.Properties.LatestModelApplied {
		t.Error("instance 0 should not have the latest model before manualupgrade")
	}
	mp, err := ssc.BeginUpdateInstances(v.ctx, rg, "vmss", armcompute.VirtualMachineScaleSetVMInstanceRequiredIDs{InstanceIDs: []*string{to.Ptr("0"), to.Ptr("1")}}, nil)
	v.must(err, "manualupgrade")
	_, err = mp.PollUntilDone(v.ctx, fastPoll)
	v.must(err, "manualupgrade")
	if got := v.poolMembers("kubernetes"); len(got) != 3 {
		t.Errorf("pool members after manualupgrade: %v", got)
	}

	// DeleteInstances and instance DELETE lower the capacity; scale-in removes the highest ids.
	dp, err := ssc.BeginDeleteInstances(v.ctx, rg, "vmss", armcompute.VirtualMachineScaleSetVMInstanceRequiredIDs{InstanceIDs: []*string{to.Ptr("0")}}, nil)
	v.must(err, "delete instances")
	_, err = dp.PollUntilDone(v.ctx, fastPoll)
	v.must(err, "delete instances")
	ddp, err := vmc.BeginDelete(v.ctx, rg, "vmss", "1", nil)
	v.must(err, "delete instance")
	_, err = ddp.PollUntilDone(v.ctx, fastPoll)
	v.must(err, "delete instance")
	cur, err = ssc.Get(v.ctx, rg, "vmss", nil)
	v.must(err, "get vmss")
	if *cur.SKU.Capacity != 3 {
		t.Errorf("capacity after deleting 2 instances: %d", *cur.SKU.Capacity)
	}
	if got := v.poolMembers("kubernetes"); len(got) != 1 {
		t.Errorf("pool members after deletes: %v", got)
	}
	cur.SKU.Capacity = to.Ptr[int64](2)
	v.putScaleSet("vmss", cur.VirtualMachineScaleSet, nil)
	left, _ := v.instances("vmss", false)
	if len(left) != 2 || *left[0].InstanceID != "2" || *left[1].InstanceID != "3" {
		ids := []string{}
		for _, l := range left {
			ids = append(ids, *l.InstanceID)
		}
		t.Errorf("after scale-in to 2: %v, want [2 3]", ids)
	}
	cur.SKU.Capacity = to.Ptr[int64](3)
	v.putScaleSet("vmss", cur.VirtualMachineScaleSet, nil)
	if _, err := vmc.Get(v.ctx, rg, "vmss", "5", nil); err != nil {
		t.Errorf("scale-out must use a fresh instance id (5): %v", err)
	}

	_, err = vmc.Get(v.ctx, rg, "vmss", "abc", nil)
	wantStatus(t, err, http.StatusBadRequest, "InvalidParameter")
	_, err = vmc.Get(v.ctx, rg, "vmss", "42", nil)
	wantStatus(t, err, http.StatusNotFound, "")

	// PATCH (Update) merges too, answers 200 and scales.
	pp, err := ssc.BeginUpdate(v.ctx, rg, "vmss", armcompute.VirtualMachineScaleSetUpdate{
		SKU:  &armcompute.SKU{Capacity: to.Ptr[int64](4)},
		Tags: map[string]*string{"team": to.Ptr("x")},
	}, nil)
	v.must(err, "patch vmss")
	patched, err := pp.PollUntilDone(v.ctx, fastPoll)
	v.must(err, "patch vmss")
	if *patched.SKU.Capacity != 4 || *patched.SKU.Name != "Standard_D2s_v3" || *patched.Tags["team"] != "x" || len(patched.Zones) != 3 {
		t.Errorf("patched scale set: %+v %v", patched.SKU, patched.Tags)
	}
	if got, _ := v.instances("vmss", false); len(got) != 4 {
		t.Errorf("instances after PATCH to 4: %d", len(got))
	}

	// Deleting the scale set removes its instances and their pool memberships.
	sdp, err := ssc.BeginDelete(v.ctx, rg, "vmss", nil)
	v.must(err, "delete vmss")
	_, err = sdp.PollUntilDone(v.ctx, fastPoll)
	v.must(err, "delete vmss")
	if got := v.poolMembers("kubernetes"); len(got) != 0 {
		t.Errorf("pool members after scale set delete: %v", got)
	}
	if docs := v.engine.ListResources(TypeVMSSVM); len(docs) != 0 {
		t.Errorf("%d instances left after scale set delete", len(docs))
	}
	// Re-created under the same name, the scale set numbers from 0 again.
	v.putScaleSet("vmss", v.scaleSet(1, nil, false), nil)
	if _, err := vmc.Get(v.ctx, rg, "vmss", "0", nil); err != nil {
		t.Errorf("re-created scale set must start at instance 0: %v", err)
	}
}

func TestFlexibleScaleSet(t *testing.T) {
	v := newEnv(t, arm.Config{})
	ss := v.putScaleSet("flex", v.scaleSet(3, []string{"1", "2"}, true), nil)
	vms := v.comp.NewVirtualMachinesClient()
	// A standalone VM that must not match the filter.
	nic := v.nic("solo-nic")
	p, err := vms.BeginCreateOrUpdate(v.ctx, rg, "solo", armcompute.VirtualMachine{
		Location:   to.Ptr(loc),
		Properties: &armcompute.VirtualMachineProperties{NetworkProfile: &armcompute.NetworkProfile{NetworkInterfaces: []*armcompute.NetworkInterfaceReference{{ID: nic.ID}}}},
	}, nil)
	v.must(err, "create solo vm")
	_, err = p.PollUntilDone(v.ctx, fastPoll)
	v.must(err, "create solo vm")

	filter := "'virtualMachineScaleSet/id' eq '" + *ss.ID + "'"
	pager := vms.NewListPager(rg, &armcompute.VirtualMachinesClientListOptions{Filter: to.Ptr(filter), Expand: to.Ptr(armcompute.ExpandTypeForListVMsInstanceView)})
	var members []*armcompute.VirtualMachine
	for pager.More() {
		page, err := pager.NextPage(v.ctx)
		v.must(err, "list flex members")
		members = append(members, page.Value...)
	}
	if len(members) != 3 {
		t.Fatalf("flex members: %d, want 3", len(members))
	}
	zones := map[string]int{}
	for _, m := range members {
		if !strings.HasPrefix(*m.Name, "flex_") || len(*m.Name) != len("flex_")+8 {
			t.Errorf("flex member name %s", *m.Name)
		}
		if !strings.EqualFold(*m.Properties.VirtualMachineScaleSet.ID, *ss.ID) || m.Properties.InstanceView == nil {
			t.Errorf("flex member %s: %+v", *m.Name, m.Properties)
		}
		zones[*m.Zones[0]]++
		nic, err := v.net.NewInterfacesClient().Get(v.ctx, rg, *m.Name+"-nic", nil)
		v.must(err, "flex member nic")
		if nic.Properties.IPConfigurations[0].Properties.PrivateIPAddress == nil ||
			!strings.EqualFold(*nic.Properties.VirtualMachine.ID, *m.ID) {
			t.Errorf("flex nic %s: %+v", *nic.Name, nic.Properties)
		}
	}
	if zones["1"] != 2 || zones["2"] != 1 {
		t.Errorf("flex zones: %v", zones)
	}
	all := vms.NewListPager(rg, nil)
	n := 0
	for all.More() {
		page, err := all.NextPage(v.ctx)
		v.must(err, "list all vms")
		n += len(page.Value)
	}
	if n != 4 {
		t.Errorf("unfiltered list: %d VMs, want 4", n)
	}
	allSub := vms.NewListAllPager(&armcompute.VirtualMachinesClientListAllOptions{Filter: to.Ptr(filter)})
	n = 0
	for allSub.More() {
		page, err := allSub.NextPage(v.ctx)
		v.must(err, "list subscription vms")
		n += len(page.Value)
	}
	if n != 3 {
		t.Errorf("subscription-wide filtered list: %d VMs, want 3", n)
	}
	_, err = vms.NewListPager(rg, &armcompute.VirtualMachinesClientListOptions{Filter: to.Ptr("name eq 'x'")}).NextPage(v.ctx)
	wantStatus(t, err, http.StatusBadRequest, "InvalidParameter")

	// A VM created into the scale set, and its deletion, move the capacity.
	extraNIC := v.nic("extra-nic")
	ep, err := vms.BeginCreateOrUpdate(v.ctx, rg, "extra", armcompute.VirtualMachine{
		Location: to.Ptr(loc),
		Properties: &armcompute.VirtualMachineProperties{
			VirtualMachineScaleSet: &armcompute.SubResource{ID: ss.ID},
			NetworkProfile:         &armcompute.NetworkProfile{NetworkInterfaces: []*armcompute.NetworkInterfaceReference{{ID: extraNIC.ID}}},
		},
	}, nil)
	v.must(err, "create flex member")
	_, err = ep.PollUntilDone(v.ctx, fastPoll)
	v.must(err, "create flex member")
	capacity := func() int64 {
		cur, err := v.comp.NewVirtualMachineScaleSetsClient().Get(v.ctx, rg, "flex", nil)
		v.must(err, "get flex")
		return *cur.SKU.Capacity
	}
	if c := capacity(); c != 4 {
		t.Errorf("capacity after adding a member: %d", c)
	}
	xp, err := vms.BeginDelete(v.ctx, rg, "extra", nil)
	v.must(err, "delete flex member")
	_, err = xp.PollUntilDone(v.ctx, fastPoll)
	v.must(err, "delete flex member")
	if c := capacity(); c != 3 {
		t.Errorf("capacity after deleting a member: %d", c)
	}
	_, err = vms.BeginCreateOrUpdate(v.ctx, rg, "solo", armcompute.VirtualMachine{
		Location:   to.Ptr(loc),
		Properties: &armcompute.VirtualMachineProperties{VirtualMachineScaleSet: &armcompute.SubResource{ID: ss.ID}},
	}, nil)
	wantStatus(t, err, http.StatusConflict, "PropertyChangeNotAllowed")

	// Scale in to 1: two members and their NICs go away.
	ss.SKU.Capacity = to.Ptr[int64](1)
	v.putScaleSet("flex", ss, nil)
	if left := flexCount(t, v, *ss.ID); left != 1 {
		t.Errorf("flex members after scale-in: %d", left)
	}
	if nics := len(v.engine.ListResources(TypeNIC)); nics != 3 {
		t.Errorf("NICs after flex scale-in: %d, want 3 (solo, extra, 1 member)", nics)
	}
	if c := capacity(); c != 1 {
		t.Errorf("capacity after scale-in: %d", c)
	}
}

func flexCount(t *testing.T, v *env, ssID string) int {
	t.Helper()
	n := 0
	for _, raw := range v.engine.ListResources(TypeVM) {
		if strings.Contains(strings.ToLower(string(raw)), strings.ToLower(`"virtualMachineScaleSet":{"id":"`+ssID+`"}`)) {
			n++
		}
	}
	return n
}

func TestPowerActions(t *testing.T) {
	v := newEnv(t, arm.Config{LRODuration: 100 * time.Millisecond, PollRetryAfter: 10 * time.Millisecond})
	nic := v.nic("n1")
	vms := v.comp.NewVirtualMachinesClient()
	p, err := vms.BeginCreateOrUpdate(v.ctx, rg, "vm", armcompute.VirtualMachine{
		Location:   to.Ptr(loc),
		Zones:      []*string{to.Ptr("2")},
		Properties: &armcompute.VirtualMachineProperties{NetworkProfile: &armcompute.NetworkProfile{NetworkInterfaces: []*armcompute.NetworkInterfaceReference{{ID: nic.ID}}}},
	}, nil)
	v.must(err, "create vm")
	if p.Done() {
		t.Error("create should still be in progress with a 100ms LRO duration")
	}
	created, err := p.PollUntilDone(v.ctx, fastPoll)
	v.must(err, "create vm")
	if *created.Properties.ProvisioningState != "Succeeded" {
		t.Errorf("provisioning state %s", *created.Properties.ProvisioningState)
	}
	check := func(want string) {
		t.Helper()
		r, err := vms.Get(v.ctx, rg, "vm", &armcompute.VirtualMachinesClientGetOptions{Expand: to.Ptr(armcompute.InstanceViewTypesInstanceView)})
		v.must(err, "get vm")
		if got := powerState(r.Properties.InstanceView.Statuses); got != want {
			t.Errorf("power state %s, want %s", got, want)
		}
		if *r.Etag != *created.Etag {
			t.Errorf("power operation changed the etag: %s → %s", *created.Etag, *r.Etag)
		}
	}
	dp, err := vms.BeginDeallocate(v.ctx, rg, "vm", nil)
	v.must(err, "deallocate")
	_, err = dp.PollUntilDone(v.ctx, fastPoll)
	v.must(err, "deallocate")
	check("deallocated")
	sp, err := vms.BeginStart(v.ctx, rg, "vm", nil)
	v.must(err, "start")
	_, err = sp.PollUntilDone(v.ctx, fastPoll)
	v.must(err, "start")
	check("running")
	op, err := vms.BeginPowerOff(v.ctx, rg, "vm", nil)
	v.must(err, "power off")
	_, err = op.PollUntilDone(v.ctx, fastPoll)
	v.must(err, "power off")
	check("stopped")
	v.must(SetPower(v.engine, *created.ID, PowerRunning), "SetPower")
	check("running")
	if err := SetPower(v.engine, *created.ID+"x", PowerRunning); err == nil {
		t.Error("SetPower on a missing VM must fail")
	}
	if err := SetPower(v.engine, *created.ID, "sleeping"); err == nil {
		t.Error("SetPower with an unknown state must fail")
	}

	// Scale set instances: deallocate through the scale set action.
	v.putScaleSet("ss", v.scaleSet(2, nil, false), nil)
	ssc := v.comp.NewVirtualMachineScaleSetsClient()
	sdp, err := ssc.BeginDeallocate(v.ctx, rg, "ss", &armcompute.VirtualMachineScaleSetsClientBeginDeallocateOptions{
		VMInstanceIDs: &armcompute.VirtualMachineScaleSetVMInstanceIDs{InstanceIDs: []*string{to.Ptr("1")}},
	})
	v.must(err, "deallocate instance")
	_, err = sdp.PollUntilDone(v.ctx, fastPoll)
	v.must(err, "deallocate instance")
	iv, err := v.comp.NewVirtualMachineScaleSetVMsClient().GetInstanceView(v.ctx, rg, "ss", "1", nil)
	v.must(err, "instance view")
	if powerState(iv.Statuses) != "deallocated" {
		t.Errorf("instance 1 power: %s", powerState(iv.Statuses))
	}
	ssiv, err := ssc.GetInstanceView(v.ctx, rg, "ss", nil)
	v.must(err, "scale set instance view")
	if sum := ssiv.VirtualMachine.StatusesSummary; len(sum) != 2 || *sum[0].Code != "PowerState/deallocated" || *sum[0].Count != 1 {
		t.Errorf("scale set statuses summary: %+v", sum)
	}
	iv0, err := v.comp.NewVirtualMachineScaleSetVMsClient().GetInstanceView(v.ctx, rg, "ss", "0", nil)
	v.must(err, "instance view")
	if powerState(iv0.Statuses) != "running" || *iv0.ComputerName != "aks-pool-vmss000000" {
		t.Errorf("instance 0: %s %v", powerState(iv0.Statuses), iv0.ComputerName)
	}
}

func TestDisks(t *testing.T) {
	v := newEnv(t, arm.Config{})
	disks := v.comp.NewDisksClient()
	p, err := disks.BeginCreateOrUpdate(v.ctx, rg, "data", armcompute.Disk{
		Location: to.Ptr(loc),
		Zones:    []*string{to.Ptr("1")},
		SKU:      &armcompute.DiskSKU{Name: to.Ptr(armcompute.DiskStorageAccountTypesPremiumLRS)},
		Properties: &armcompute.DiskProperties{
			CreationData: &armcompute.CreationData{CreateOption: to.Ptr(armcompute.DiskCreateOptionEmpty)},
			DiskSizeGB:   to.Ptr[int32](10),
		},
	}, nil)
	v.must(err, "create disk")
	d, err := p.PollUntilDone(v.ctx, fastPoll)
	v.must(err, "create disk")
	if *d.Properties.DiskSizeBytes != 10<<30 || *d.Properties.DiskState != armcompute.DiskStateUnattached || *d.SKU.Tier != "Premium" {
		t.Errorf("disk: %+v", d.Properties)
	}
	_, err = disks.BeginCreateOrUpdate(v.ctx, rg, "bad", armcompute.Disk{Location: to.Ptr(loc), Properties: &armcompute.DiskProperties{
		CreationData: &armcompute.CreationData{CreateOption: to.Ptr(armcompute.DiskCreateOptionEmpty)},
	}}, nil)
	wantStatus(t, err, http.StatusBadRequest, "InvalidParameter")

	nic := v.nic("n1")
	vms := v.comp.NewVirtualMachinesClient()
	vp, err := vms.BeginCreateOrUpdate(v.ctx, rg, "vm", armcompute.VirtualMachine{
		Location:   to.Ptr(loc),
		Zones:      []*string{to.Ptr("1")},
		Properties: &armcompute.VirtualMachineProperties{NetworkProfile: &armcompute.NetworkProfile{NetworkInterfaces: []*armcompute.NetworkInterfaceReference{{ID: nic.ID}}}},
	}, nil)
	v.must(err, "create vm")
	_, err = vp.PollUntilDone(v.ctx, fastPoll)
	v.must(err, "create vm")

	ap, err := vms.BeginAttachDetachDataDisks(v.ctx, rg, "vm", armcompute.AttachDetachDataDisksRequest{
		DataDisksToAttach: []*armcompute.DataDisksToAttach{{DiskID: d.ID}},
	}, nil)
	v.must(err, "attach")
	_, err = ap.PollUntilDone(v.ctx, fastPoll)
	v.must(err, "attach")
	d2, err := disks.Get(v.ctx, rg, "data", nil)
	v.must(err, "get disk")
	if d2.ManagedBy == nil || !strings.HasSuffix(*d2.ManagedBy, "/virtualMachines/vm") || *d2.Properties.DiskState != armcompute.DiskStateAttached {
		t.Errorf("attached disk: managedBy %v state %v", d2.ManagedBy, *d2.Properties.DiskState)
	}
	vm, err := vms.Get(v.ctx, rg, "vm", nil)
	v.must(err, "get vm")
	if dd := vm.Properties.StorageProfile.DataDisks; len(dd) != 1 || *dd[0].Lun != 0 || *dd[0].Name != "data" {
		t.Errorf("vm data disks: %+v", dd)
	}

	_, err = disks.BeginDelete(v.ctx, rg, "data", nil)
	wantStatus(t, err, http.StatusConflict, "OperationNotAllowed")

	dp, err := vms.BeginAttachDetachDataDisks(v.ctx, rg, "vm", armcompute.AttachDetachDataDisksRequest{
		DataDisksToDetach: []*armcompute.DataDisksToDetach{{DiskID: d.ID}},
	}, nil)
	v.must(err, "detach")
	_, err = dp.PollUntilDone(v.ctx, fastPoll)
	v.must(err, "detach")
	// Scale set instances hold disks too.
	v.putScaleSet("ss", v.scaleSet(1, []string{"1"}, false), nil)
	sp, err := v.comp.NewVirtualMachineScaleSetVMsClient().BeginAttachDetachDataDisks(v.ctx, rg, "ss", "0", armcompute.AttachDetachDataDisksRequest{
		DataDisksToAttach: []*armcompute.DataDisksToAttach{{DiskID: d.ID, Lun: to.Ptr[int32](3)}},
	}, nil)
	v.must(err, "attach to instance")
	_, err = sp.PollUntilDone(v.ctx, fastPoll)
	v.must(err, "attach to instance")
	d3, err := disks.Get(v.ctx, rg, "data", nil)
	v.must(err, "get disk")
	if d3.ManagedBy == nil || !strings.HasSuffix(*d3.ManagedBy, "/virtualMachineScaleSets/ss/virtualMachines/0") {
		t.Errorf("disk on instance: managedBy %v", d3.ManagedBy)
	}
	_, err = vms.BeginAttachDetachDataDisks(v.ctx, rg, "vm", armcompute.AttachDetachDataDisksRequest{
		DataDisksToAttach: []*armcompute.DataDisksToAttach{{DiskID: d.ID}},
	}, nil)
	wantStatus(t, err, http.StatusConflict, "OperationNotAllowed")
	sp, err = v.comp.NewVirtualMachineScaleSetVMsClient().BeginAttachDetachDataDisks(v.ctx, rg, "ss", "0", armcompute.AttachDetachDataDisksRequest{
		DataDisksToDetach: []*armcompute.DataDisksToDetach{{DiskID: d.ID}},
	}, nil)
	v.must(err, "detach from instance")
	_, err = sp.PollUntilDone(v.ctx, fastPoll)
	v.must(err, "detach from instance")

	del, err := disks.BeginDelete(v.ctx, rg, "data", nil)
	v.must(err, "delete detached disk")
	_, err = del.PollUntilDone(v.ctx, fastPoll)
	v.must(err, "delete detached disk")
	_, err = disks.Get(v.ctx, rg, "data", nil)
	wantStatus(t, err, http.StatusNotFound, "ResourceNotFound")
}

func TestProviderDocuments(t *testing.T) {
	v := newEnv(t, arm.Config{})
	pc := v.res.NewProvidersClient()
	p, err := pc.Get(v.ctx, "Microsoft.Compute", nil)
	v.must(err, "get provider")
	found := false
	for _, rt := range p.ResourceTypes {
		if *rt.ResourceType != "virtualMachines" {
			continue
		}
		found = true
		if len(rt.ZoneMappings) != 1 || *rt.ZoneMappings[0].Location != "East US" || len(rt.ZoneMappings[0].Zones) != 3 {
			t.Errorf("virtualMachines zone mappings: %+v", rt.ZoneMappings)
		}
	}
	if !found {
		t.Error("no virtualMachines resource type")
	}
	np, err := pc.Get(v.ctx, "microsoft.network", nil)
	v.must(err, "get network provider")
	if *np.Namespace != "Microsoft.Network" || len(np.ResourceTypes) == 0 {
		t.Errorf("network provider: %+v", np)
	}
}

// TestProviderList: GET /subscriptions/{s}/providers lists the providers azsim serves, through
// the SDK's pager.
func TestProviderList(t *testing.T) {
	v := newEnv(t, arm.Config{})
	pager := v.res.NewProvidersClient().NewListPager(nil)
	var names []string
	for pager.More() {
		page, err := pager.NextPage(v.ctx)
		v.must(err, "list providers")
		for _, p := range page.Value {
			names = append(names, *p.Namespace)
			if len(p.ResourceTypes) == 0 {
				t.Errorf("provider %s has no resource types", *p.Namespace)
			}
		}
	}
	if strings.Join(names, ",") != "Microsoft.Compute,Microsoft.Network" {
		t.Errorf("providers: %v", names)
	}
}
