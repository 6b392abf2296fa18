package compute

import (
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// The instance view (power state, fault and update domain) is runtime state:
// it is kept in the stored document under properties.instanceView, never taken
// from a client body, and shown only with $expand=instanceView or on
// .../instanceView (see read.go).

// prepareVM validates and completes a VM write (create, merge update, PATCH).
func (h *handler) prepareVM(tx *arm.Tx, w *arm.Write) error {
	var vm armcompute.VirtualMachine
	if err := decode(w.Doc, &vm); err != nil {
		return err
	}
	var old armcompute.VirtualMachine
	if !w.IsCreate() {
		if err := decode(w.Old, &old); err != nil {
			return err
		}
	}
	id := w.ID.String()
	if vm.Properties == nil {
		vm.Properties = &armcompute.VirtualMachineProperties{}
	}
	p := vm.Properties
	if err := h.checkZones(str(vm.Location), vm.Zones, w.ID.Name()); err != nil {
		return err
	}
	if !w.IsCreate() && !arm.SameID(refOf(old.Properties.VirtualMachineScaleSet), refOf(p.VirtualMachineScaleSet)) {
		return arm.Errorf(http.StatusConflict, "PropertyChangeNotAllowed", "Changing property 'virtualMachineScaleSet' is not allowed.")
	}
	if !w.IsCreate() && !sameZones(old.Zones, vm.Zones) {
		return arm.Errorf(http.StatusConflict, "PropertyChangeNotAllowed", "Changing property 'zones' is not allowed.")
	}
	if p.AvailabilitySet != nil && p.AvailabilitySet.ID != nil {
		if len(vm.Zones) > 0 {
			return invalidParameter("availabilitySet", "Virtual Machine '%s' cannot be in an availability set and in availability zones at the same time.", w.ID.Name())
		}
		if err := requireRefs(tx, id, *p.AvailabilitySet.ID); err != nil {
			return err
		}
	}
	if p.VirtualMachineScaleSet != nil && p.VirtualMachineScaleSet.ID != nil {
		ssDoc, ok := tx.Get(*p.VirtualMachineScaleSet.ID)
		if !ok {
			return arm.InvalidReference(*p.VirtualMachineScaleSet.ID, id)
		}
		if !strings.EqualFold(arm.Str(ssDoc, "properties", "orchestrationMode"), string(armcompute.OrchestrationModeFlexible)) {
			return invalidParameter("virtualMachineScaleSet", "Virtual machine scale set %s does not use Flexible orchestration; only Flexible scale sets accept virtual machines.", *p.VirtualMachineScaleSet.ID)
		}
	}
	if err := checkVMNICs(tx, id, p.NetworkProfile); err != nil {
		return err
	}
	if err := checkDataDisks(tx, id, p.StorageProfile); err != nil {
		return err
	}
	if p.OSProfile == nil {
		p.OSProfile = &armcompute.OSProfile{}
	}
	if w.IsCreate() {
		if p.OSProfile.ComputerName == nil {
			p.OSProfile.ComputerName = to.Ptr(w.ID.Name())
		}
		p.VMID = to.Ptr(arm.NewGUID())
		DefaultVMOSDisk(p.StorageProfile, w.ID.Name(), *p.VMID)
		p.TimeCreated = to.Ptr(tx.Now().UTC())
		fd, ud := h.placeInAvailabilitySet(tx, p.AvailabilitySet)
		p.InstanceView = VMInstanceView(*p.OSProfile.ComputerName, PowerRunning, fd, ud)
		if p.VirtualMachineScaleSet != nil && p.VirtualMachineScaleSet.ID != nil {
			// A VM created into a Flexible scale set counts in its capacity.
			addCapacity(tx, *p.VirtualMachineScaleSet.ID, 1)
		}
	} else {
		// Read-only and immutable fields come from the stored model.
		p.VMID, p.TimeCreated, p.InstanceView = old.Properties.VMID, old.Properties.TimeCreated, old.Properties.InstanceView
		DefaultVMOSDisk(p.StorageProfile, w.ID.Name(), str(p.VMID))
		if old.Properties.OSProfile != nil && old.Properties.OSProfile.ComputerName != nil {
			p.OSProfile.ComputerName = old.Properties.OSProfile.ComputerName
		}
	}
	DefaultVMOSProfile(p.OSProfile, p.StorageProfile)
	if sp := p.StorageProfile; sp != nil {
		if sp.DataDisks == nil {
			sp.DataDisks = []*armcompute.DataDisk{}
		}
		if sp.OSDisk != nil && sp.OSDisk.DeleteOption == nil {
			sp.OSDisk.DeleteOption = to.Ptr(armcompute.DiskDeleteOptionTypesDetach)
		}
	}
	if vm.Identity != nil && (vm.Identity.Type == nil || *vm.Identity.Type == armcompute.ResourceIdentityTypeNone) {
		// CRP shows no identity rather than one of type None.
		vm.Identity = nil
	}
	doc, err := encode(&vm)
	if err != nil {
		return err
	}
	w.Doc = doc
	return nil
}

// afterDeleteVM lowers the capacity of the Flexible scale set a deleted VM
// belonged to (unless the scale set itself is removing it).
func (h *handler) afterDeleteVM(tx *arm.Tx, id arm.ResourceID, doc map[string]any) {
	if ss := arm.Str(doc, "properties", "virtualMachineScaleSet", "id"); ss != "" && !h.scalingIn {
		addCapacity(tx, ss, -1)
	}
}

// addCapacity changes a scale set's sku.capacity without reconciling its
// instances (the caller already added or removed one).
func addCapacity(tx *arm.Tx, ssID string, delta int) {
	_ = tx.Update(ssID, func(ss map[string]any) error {
		n, _ := numAt(ss, "sku", "capacity")
		if n+delta >= 0 {
			arm.Obj(ss, true, "sku")["capacity"] = n + delta
		}
		return nil
	})
}

func refOf(r *armcompute.SubResource) string {
	if r == nil {
		return ""
	}
	return str(r.ID)
}

func sameZones(a, b []*string) bool {
	var x, y []string
	for _, z := range a {
		x = append(x, str(z))
	}
	for _, z := range b {
		y = append(y, str(z))
	}
	return sameIDs(x, y)
}

// checkVMNICs: every NIC must exist and must not belong to another VM.
func checkVMNICs(tx *arm.Tx, vmID string, np *armcompute.NetworkProfile) error {
	if np == nil {
		return nil
	}
	for _, ref := range np.NetworkInterfaces {
		if ref == nil || ref.ID == nil {
			continue
		}
		nic, ok := tx.Get(*ref.ID)
		if !ok {
			return arm.Errorf(http.StatusNotFound, "NotFound", "Resource %s not found.", *ref.ID)
		}
		if owner := arm.Str(nic, "properties", "virtualMachine", "id"); owner != "" && !arm.SameID(owner, vmID) {
			return arm.BadRequest("NicInUse", "Network interface %s is used by existing resource %s. In order to use this network interface, it must be detached from the existing resource.", *ref.ID, owner)
		}
	}
	return nil
}

// checkDataDisks: managed data disks must exist and not be attached elsewhere.
func checkDataDisks(tx *arm.Tx, vmID string, sp *armcompute.StorageProfile) error {
	if sp == nil {
		return nil
	}
	for _, d := range sp.DataDisks {
		if d == nil || d.ManagedDisk == nil || d.ManagedDisk.ID == nil {
			continue
		}
		if err := diskAttachable(tx, *d.ManagedDisk.ID, vmID); err != nil {
			return err
		}
	}
	return nil
}

func diskAttachable(tx *arm.Tx, diskID, vmID string) error {
	disk, ok := tx.Get(diskID)
	if !ok {
		return arm.Errorf(http.StatusNotFound, "NotFound", "Disk %s is not found.", diskID)
	}
	if by := arm.Str(disk, "managedBy"); by != "" && !arm.SameID(by, vmID) {
		return arm.Errorf(http.StatusConflict, "OperationNotAllowed", "Disk '%s' is already attached to VM '%s'.", arm.Str(disk, "name"), by)
	}
	return nil
}

// placeInAvailabilitySet spreads VMs of an availability set over its fault
// and update domains in creation order.
func (h *handler) placeInAvailabilitySet(tx *arm.Tx, ref *armcompute.SubResource) (fd, ud int) {
	if ref == nil || ref.ID == nil {
		return 0, 0
	}
	as, ok := tx.Get(*ref.ID)
	if !ok {
		return 0, 0
	}
	n := 0
	for _, vm := range tx.List(TypeVM, "") {
		if arm.SameID(arm.Str(vm, "properties", "availabilitySet", "id"), *ref.ID) {
			n++
		}
	}
	fds, uds := intAt(as, 2, "properties", "platformFaultDomainCount"), intAt(as, 5, "properties", "platformUpdateDomainCount")
	return n % fds, n % uds
}

// intAt reads a positive integer at path, or def.
func intAt(doc map[string]any, def int, path ...string) int {
	if v, ok := numAt(doc, path...); ok && v > 0 {
		return v
	}
	return def
}

// numAt reads an integer at path (json.Number, float64 or int).
func numAt(doc map[string]any, path ...string) (int, bool) {
	o := arm.Obj(doc, false, path[:len(path)-1]...)
	if o == nil {
		return 0, false
	}
	switch n := o[path[len(path)-1]].(type) {
	case interface{ Int64() (int64, error) }:
		v, err := n.Int64()
		return int(v), err == nil
	case float64:
		return int(n), true
	case int:
		return n, true
	}
	return 0, false
}

// ---- actions shared by VMs and scale set instances ----

func (h *handler) instanceActions(scaleSetVM bool) map[string]arm.Action {
	power := func(state PowerState) arm.Action {
		return arm.Action{Handle: func(tx *arm.Tx, id arm.ResourceID, ar *arm.ActionRequest) (int, any, error) {
			setPower(tx, id.String(), state)
			return accepted(ar)
		}}
	}
	return map[string]arm.Action{
		"deallocate": power(PowerDeallocated),
		"poweroff":   power(PowerStopped),
		"start":      power(PowerRunning),
		"restart":    power(PowerRunning),
		"instanceview": {
			Methods: []string{http.MethodGet},
			Handle: func(tx *arm.Tx, id arm.ResourceID, ar *arm.ActionRequest) (int, any, error) {
				doc, _ := tx.Get(id.String())
				iv := arm.Obj(doc, false, "properties", "instanceView")
				if iv == nil {
					iv = map[string]any{}
				}
				return http.StatusOK, iv, nil
			},
		},
		"attachdetachdatadisks": {Handle: h.attachDetachDataDisks},
	}
}

// accepted answers an action as CRP does: 202 with both polling headers.
func accepted(ar *arm.ActionRequest) (int, any, error) {
	async, loc := ar.AsyncOperation()
	ar.Header.Set("Azure-AsyncOperation", async)
	ar.Header.Set("Location", loc)
	return http.StatusAccepted, nil, nil
}

// setPower replaces the PowerState status of a stored VM or instance.
func setPower(tx *arm.Tx, id string, state PowerState) {
	markRuntime(tx, id, func(doc map[string]any) {
		iv := arm.Obj(doc, true, "properties", "instanceView")
		var kept []map[string]any
		for _, s := range arm.Arr(iv, "statuses") {
			if !strings.HasPrefix(arm.Str(s, "code"), "PowerState/") {
				kept = append(kept, s)
			}
		}
		kept = append(kept, map[string]any{"code": "PowerState/" + string(state), "level": "Info", "displayStatus": powerDisplay[state]})
		arm.SetArr(iv, kept, "statuses")
	})
}

// PowerOf reads the power state of a stored VM or instance document.
func PowerOf(doc map[string]any) PowerState {
	for _, s := range arm.Arr(doc, "properties", "instanceView", "statuses") {
		if c := arm.Str(s, "code"); strings.HasPrefix(c, "PowerState/") {
			return PowerState(strings.TrimPrefix(c, "PowerState/"))
		}
	}
	return ""
}

// attachDetachDataDisks implements POST .../attachDetachDataDisks for VMs and
// scale set instances: it edits storageProfile.dataDisks; the deriver then
// sets the disks' managedBy.
func (h *handler) attachDetachDataDisks(tx *arm.Tx, id arm.ResourceID, ar *arm.ActionRequest) (int, any, error) {
	var req armcompute.AttachDetachDataDisksRequest
	if err := decode(ar.Body, &req); err != nil {
		return 0, nil, err
	}
	vmID := id.String()
	for _, a := range req.DataDisksToAttach {
		if a == nil || a.DiskID == nil {
			return 0, nil, invalidParameter("dataDisksToAttach", "diskId is required.")
		}
		if err := diskAttachable(tx, *a.DiskID, vmID); err != nil {
			return 0, nil, err
		}
	}
	err := tx.Update(vmID, func(doc map[string]any) error {
		sp := arm.Obj(doc, true, "properties", "storageProfile")
		disks := arm.Arr(sp, "dataDisks")
		var kept []map[string]any
		for _, d := range disks {
			detach := false
			for _, x := range req.DataDisksToDetach {
				if x != nil && x.DiskID != nil && arm.SameID(*x.DiskID, arm.Str(d, "managedDisk", "id")) {
					detach = true
				}
			}
			if !detach {
				kept = append(kept, d)
			}
		}
		for _, a := range req.DataDisksToAttach {
			already := false
			for _, d := range kept {
				already = already || arm.SameID(*a.DiskID, arm.Str(d, "managedDisk", "id"))
			}
			if already {
				continue
			}
			lun := freeLUN(kept)
			if a.Lun != nil {
				lun = int(*a.Lun)
			}
			disk, _ := tx.Get(*a.DiskID)
			entry := map[string]any{
				"lun":          lun,
				"name":         arm.Str(disk, "name"),
				"createOption": "Attach",
				"caching":      "None",
				"managedDisk":  map[string]any{"id": arm.Str(disk, "id")},
			}
			if a.Caching != nil {
				entry["caching"] = string(*a.Caching)
			}
			if sz, ok := arm.Props(disk)["diskSizeGB"]; ok {
				entry["diskSizeGB"] = sz
			}
			kept = append(kept, entry)
		}
		arm.SetArr(sp, kept, "dataDisks")
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	return accepted(ar)
}

func freeLUN(disks []map[string]any) int {
	used := map[int]bool{}
	for _, d := range disks {
		if l, ok := numAt(d, "lun"); ok {
			used[l] = true
		}
	}
	for l := 0; ; l++ {
		if !used[l] {
			return l
		}
	}
}

// SetPower sets the power state of a VM or scale set instance without an ARM
// request (for the control API and tests); the etag does not change.
func SetPower(e *arm.Engine, id string, state PowerState) error {
	if _, ok := powerDisplay[state]; !ok {
		return arm.BadRequest("InvalidParameter", "unknown power state %q", state)
	}
	return e.Do(func(tx *arm.Tx) error {
		rid, err := arm.ParseID(id)
		if err != nil || (!strings.EqualFold(rid.FullType(), TypeVM) && !strings.EqualFold(rid.FullType(), TypeVMSSVM)) {
			return arm.BadRequest("InvalidParameter", "%s is not a virtual machine or scale set instance", id)
		}
		if _, ok := tx.Get(id); !ok {
			return arm.NotFoundTopLevel(rid)
		}
		setPower(tx, id, state)
		return nil
	})
}
