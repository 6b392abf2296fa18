package compute

import (
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/network"
)

// prepareVMSS validates a scale set write (the body is already deep-merged
// into the stored model by the engine) and brings the instances in line with
// sku.capacity: Uniform instances under the scale set, or Flexible member VMs
// with their own NICs.
func (h *handler) prepareVMSS(tx *arm.Tx, w *arm.Write) error {
	var ss armcompute.VirtualMachineScaleSet
	if err := decode(w.Doc, &ss); err != nil {
		return err
	}
	var old *armcompute.VirtualMachineScaleSet
	if !w.IsCreate() {
		old = new(armcompute.VirtualMachineScaleSet)
		if err := decode(w.Old, old); err != nil {
			return err
		}
	}
	id := w.ID.String()
	ss.Name = to.Ptr(w.ID.Name())
	if ss.Properties == nil {
		ss.Properties = &armcompute.VirtualMachineScaleSetProperties{}
	}
	if err := h.checkZones(str(ss.Location), ss.Zones, w.ID.Name()); err != nil {
		return err
	}
	if old != nil {
		if IsFlexible(old) != IsFlexible(&ss) {
			return arm.Errorf(http.StatusConflict, "PropertyChangeNotAllowed", "Changing property 'orchestrationMode' is not allowed.")
		}
		if !sameZones(old.Zones, ss.Zones) && len(ss.Zones) < len(old.Zones) {
			return arm.Errorf(http.StatusConflict, "PropertyChangeNotAllowed", "Removing zones from a virtual machine scale set is not allowed.")
		}
		ss.Properties.UniqueID, ss.Properties.TimeCreated = old.Properties.UniqueID, old.Properties.TimeCreated
	} else {
		ss.Properties.UniqueID = to.Ptr(arm.NewGUID())
		ss.Properties.TimeCreated = to.Ptr(tx.Now().UTC())
	}
	if ss.SKU == nil {
		ss.SKU = &armcompute.SKU{}
	}
	if ss.SKU.Capacity == nil {
		ss.SKU.Capacity = to.Ptr[int64](0)
	}
	if *ss.SKU.Capacity < 0 || *ss.SKU.Capacity > 1000 {
		return invalidParameter("sku.capacity", "The capacity %d is outside the allowed range 0..1000.", *ss.SKU.Capacity)
	}
	if prof := ss.Properties.VirtualMachineProfile; prof != nil && !IsFlexible(&ss) {
		if prof.OSProfile == nil {
			prof.OSProfile = &armcompute.VirtualMachineScaleSetOSProfile{}
		}
		if prof.OSProfile.ComputerNamePrefix == nil {
			prof.OSProfile.ComputerNamePrefix = to.Ptr(w.ID.Name())
		}
	}
	DefaultScaleSet(&ss)
	if err := checkScaleSetNetwork(tx, id, ScaleSetIPConfigs(scaleSetNICConfigs(&ss))); err != nil {
		return err
	}
	var err error
	if IsFlexible(&ss) {
		err = h.reconcileFlex(tx, id, &ss)
	} else {
		err = h.reconcileUniform(tx, id, &ss, old)
	}
	if err != nil {
		return err
	}
	doc, err := encode(&ss)
	if err != nil {
		return err
	}
	w.Doc = doc
	return nil
}

// ---- Uniform ----

func (h *handler) reconcileUniform(tx *arm.Tx, ssID string, ss *armcompute.VirtualMachineScaleSet, old *armcompute.VirtualMachineScaleSet) error {
	var members []Member
	for _, d := range tx.List(TypeVMSSVM, ssID) {
		n, _ := ParseInstanceID(arm.Str(d, "instanceId"))
		zone := ""
		if zs, _ := d["zones"].([]any); len(zs) > 0 {
			zone, _ = zs[0].(string)
		}
		members = append(members, Member{ID: n, Zone: zone})
	}
	key := arm.KeyOf(ssID)
	if old == nil {
		// A new scale set (even one re-created under an old name, or after
		// an engine reset) numbers its instances from 0 again.
		h.nextID[key] = 0
	}
	plan := PlanCapacity(members, int(*ss.SKU.Capacity), h.nextID[key], ScaleSetZones(ss), ScaleSetFaultDomains(ss))
	h.nextID[key] = plan.NextID
	h.scalingIn = true
	for _, n := range plan.Delete {
		tx.Delete(ssID + "/virtualMachines/" + strconv.Itoa(n))
	}
	h.scalingIn = false
	for _, p := range plan.Create {
		vm := NewUniformInstance(ss, ssID, p, arm.NewGUID(), tx.Now())
		vm.Properties.InstanceView = VMSSVMInstanceView(str(vm.Properties.OSProfile.ComputerName), PowerRunning, p.FaultDomain, UpdateDomain(p.ID))
		if err := allocateInstanceIPs(tx, vm); err != nil {
			return err
		}
		doc, err := encode(vm)
		if err != nil {
			return err
		}
		if err := createDoc(tx, *vm.ID, doc); err != nil {
			return err
		}
	}
	if old == nil {
		return nil
	}
	// A model change reaches existing instances only through manualupgrade,
	// unless the upgrade policy is Automatic or Rolling.
	automatic := ss.Properties.UpgradePolicy != nil && ss.Properties.UpgradePolicy.Mode != nil &&
		*ss.Properties.UpgradePolicy.Mode != armcompute.UpgradeModeManual
	model := scaleSetNICConfigs(ss)
	for _, d := range tx.List(TypeVMSSVM, ssID) {
		vmID := arm.Str(d, "id")
		current := arm.Obj(d, false, "properties", "networkProfileConfiguration")
		if sameJSON(current, map[string]any{"networkInterfaceConfigurations": model}) {
			continue
		}
		if automatic {
			if err := h.upgradeInstance(tx, vmID, ss); err != nil {
				return err
			}
			continue
		}
		if err := tx.Update(vmID, func(doc map[string]any) error {
			arm.Props(doc)["latestModelApplied"] = false
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// createDoc stores a resource created as a side effect of another write. The
// engine names a new resource after the last ID segment; a scale set
// instance is named {ss}_{id} instead, so the name is restored right after
// creation (same transaction, before anyone can read it, hence no new etag).
func createDoc(tx *arm.Tx, id string, doc map[string]any) error {
	name, _ := doc["name"].(string)
	if err := tx.Create(id, doc); err != nil {
		return err
	}
	if stored, ok := tx.Get(id); ok && name != "" {
		stored["name"] = name
	}
	return nil
}

// upgradeInstance applies the scale set's network model to one instance.
func (h *handler) upgradeInstance(tx *arm.Tx, vmID string, ss *armcompute.VirtualMachineScaleSet) error {
	return tx.Update(vmID, func(doc map[string]any) error {
		var vm armcompute.VirtualMachineScaleSetVM
		if err := decode(doc, &vm); err != nil {
			return err
		}
		ApplyScaleSetModel(&vm, ss)
		SyncUniformNetworkProfile(&vm)
		if err := allocateInstanceIPs(tx, &vm); err != nil {
			return err
		}
		nd, err := encode(&vm)
		if err != nil {
			return err
		}
		replaceDoc(doc, nd)
		return nil
	})
}

// replaceDoc swaps the content of a stored document in place (inside Update).
func replaceDoc(dst, src map[string]any) {
	for k := range dst {
		delete(dst, k)
	}
	for k, v := range src {
		dst[k] = v
	}
}

// allocateInstanceIPs reserves a private address for every ip configuration
// of an instance and frees those of removed ip configurations. The owner of
// an address is the ip configuration's ID, under the instance ID, so the
// engine frees everything when the instance is deleted.
func allocateInstanceIPs(tx *arm.Tx, vm *armcompute.VirtualMachineScaleSetVM) error {
	var keep []string
	memberships := map[string][]string{}
	for _, ref := range instanceIPConfigs(vm) {
		memberships[ipConfigID(str(vm.ID), ref)] = ref.Pools
	}
	// The NIC limits NRP enforces hold for scale set NICs too.
	if err := network.CheckRulesPerNIC(tx, memberships); err != nil {
		return err
	}
	for _, ref := range instanceIPConfigs(vm) {
		owner := ipConfigID(str(vm.ID), ref)
		if ref.SubnetID == "" {
			continue
		}
		if _, err := network.AllocatePrivateIPVersion(tx, ref.SubnetID, owner, "", ref.Version()); err != nil {
			return err
		}
		keep = append(keep, owner)
	}
	tx.ReleaseIPsExcept(str(vm.ID), keep)
	return nil
}

func instanceIPConfigs(vm *armcompute.VirtualMachineScaleSetVM) []IPConfigRef {
	if vm.Properties == nil || vm.Properties.NetworkProfileConfiguration == nil {
		return nil
	}
	return ScaleSetIPConfigs(vm.Properties.NetworkProfileConfiguration.NetworkInterfaceConfigurations)
}

func ipConfigID(vmID string, r IPConfigRef) string {
	return vmID + "/networkInterfaces/" + r.NIC + "/ipConfigurations/" + r.IPConfig
}

// ---- Flexible ----

func (h *handler) reconcileFlex(tx *arm.Tx, ssID string, ss *armcompute.VirtualMachineScaleSet) error {
	members := flexMembers(tx, ssID)
	want := int(*ss.SKU.Capacity)
	if len(members) > want {
		// Newest members go first.
		sort.SliceStable(members, func(i, j int) bool {
			ti, tj := arm.Str(members[i], "properties", "timeCreated"), arm.Str(members[j], "properties", "timeCreated")
			if ti != tj {
				return ti > tj
			}
			return strings.ToLower(arm.Str(members[i], "id")) > strings.ToLower(arm.Str(members[j], "id"))
		})
		h.scalingIn = true
		for _, m := range members[:len(members)-want] {
			deleteFlexMember(tx, m)
		}
		h.scalingIn = false
		return nil
	}
	zones := ScaleSetZones(ss)
	load := map[string]int{}
	for _, m := range members {
		if zs, _ := m["zones"].([]any); len(zs) > 0 {
			z, _ := zs[0].(string)
			load[z]++
		}
	}
	ssRID := arm.MustParseID(ssID)
	for i := len(members); i < want; i++ {
		var name, vmID string
		for {
			name = FlexVMName(str(ss.Name), h.rnd())
			vmID = ssRID.Scope() + "/providers/" + TypeVM + "/" + name
			if !tx.Exists(vmID) {
				break
			}
		}
		zone := leastLoadedZone(zones, load)
		load[zone]++
		nicID := ssRID.Scope() + "/providers/" + TypeNIC + "/" + FlexNICName(name)
		if err := createFlexNIC(tx, ss, nicID, vmID); err != nil {
			return err
		}
		vm := NewFlexVM(ss, ssID, vmID, name, zone, nicID, arm.NewGUID(), tx.Now())
		vm.Properties.InstanceView = VMInstanceView(str(vm.Properties.OSProfile.ComputerName), PowerRunning, FaultDomain(i, ScaleSetFaultDomains(ss)), UpdateDomain(i))
		doc, err := encode(vm)
		if err != nil {
			return err
		}
		if err := createDoc(tx, vmID, doc); err != nil {
			return err
		}
	}
	return nil
}

func flexMembers(tx *arm.Tx, ssID string) []map[string]any {
	var out []map[string]any
	for _, vm := range tx.List(TypeVM, "") {
		if arm.SameID(arm.Str(vm, "properties", "virtualMachineScaleSet", "id"), ssID) {
			out = append(out, vm)
		}
	}
	return out
}

// createFlexNIC stores the standalone NIC of a new Flexible member, with
// private addresses allocated from its subnets.
func createFlexNIC(tx *arm.Tx, ss *armcompute.VirtualMachineScaleSet, nicID, vmID string) error {
	nic := FlexNIC(ss, nicID, vmID)
	nic.Properties.ResourceGUID = to.Ptr(arm.NewGUID())
	for _, ipc := range nic.Properties.IPConfigurations {
		ipc.ID = to.Ptr(nicID + "/ipConfigurations/" + str(ipc.Name))
		if ipc.Properties.Subnet == nil || ipc.Properties.Subnet.ID == nil {
			continue
		}
		version := network.IPv4
		if ipc.Properties.PrivateIPAddressVersion != nil {
			version = string(*ipc.Properties.PrivateIPAddressVersion)
		}
		ip, err := network.AllocatePrivateIPVersion(tx, *ipc.Properties.Subnet.ID, *ipc.ID, "", version)
		if err != nil {
			return err
		}
		ipc.Properties.PrivateIPAddress = to.Ptr(ip)
	}
	doc, err := encode(nic)
	if err != nil {
		return err
	}
	return tx.Create(nicID, doc)
}

// deleteFlexMember removes a member VM and the NICs Azure created for it.
func deleteFlexMember(tx *arm.Tx, vm map[string]any) {
	name := arm.Str(vm, "name")
	tx.Delete(arm.Str(vm, "id"))
	for _, nicID := range arm.RefIDs(vm, "properties", "networkProfile", "networkInterfaces") {
		if rid, err := arm.ParseID(nicID); err == nil && strings.EqualFold(rid.Name(), FlexNICName(name)) {
			tx.Delete(nicID)
		}
	}
}

// afterDeleteVMSS removes the instances (Uniform) or member VMs (Flexible).
func (h *handler) afterDeleteVMSS(tx *arm.Tx, id arm.ResourceID, doc map[string]any) {
	ssID := id.String()
	h.scalingIn = true
	defer func() { h.scalingIn = false }()
	for _, d := range tx.List(TypeVMSSVM, ssID) {
		tx.Delete(arm.Str(d, "id"))
	}
	for _, vm := range flexMembers(tx, ssID) {
		deleteFlexMember(tx, vm)
	}
	delete(h.nextID, id.Key())
}

// ---- scale set actions ----

type instanceIDs struct {
	InstanceIDs []string `json:"instanceIds"`
}

func (h *handler) scaleSetActions() map[string]arm.Action {
	power := func(state PowerState) arm.Action {
		return arm.Action{Handle: func(tx *arm.Tx, id arm.ResourceID, ar *arm.ActionRequest) (int, any, error) {
			ids, err := h.selectInstances(tx, id.String(), ar.Body, false)
			if err != nil {
				return 0, nil, err
			}
			for _, vmID := range ids {
				setPower(tx, vmID, state)
			}
			return accepted(ar)
		}}
	}
	return map[string]arm.Action{
		"deallocate": power(PowerDeallocated),
		"poweroff":   power(PowerStopped),
		"start":      power(PowerRunning),
		"instanceview": {
			Methods: []string{http.MethodGet},
			Handle: func(tx *arm.Tx, id arm.ResourceID, ar *arm.ActionRequest) (int, any, error) {
				var states []PowerState
				for _, d := range tx.List(TypeVMSSVM, id.String()) {
					states = append(states, PowerOf(d))
				}
				for _, d := range flexMembers(tx, id.String()) {
					states = append(states, PowerOf(d))
				}
				return http.StatusOK, ScaleSetInstanceView(states), nil
			},
		},
		"manualupgrade": {Handle: func(tx *arm.Tx, id arm.ResourceID, ar *arm.ActionRequest) (int, any, error) {
			ids, err := h.selectInstances(tx, id.String(), ar.Body, true)
			if err != nil {
				return 0, nil, err
			}
			doc, _ := tx.Get(id.String())
			var ss armcompute.VirtualMachineScaleSet
			if err := decode(doc, &ss); err != nil {
				return 0, nil, err
			}
			for _, vmID := range ids {
				if err := h.upgradeInstance(tx, vmID, &ss); err != nil {
					return 0, nil, err
				}
			}
			return accepted(ar)
		}},
		"delete": {Handle: func(tx *arm.Tx, id arm.ResourceID, ar *arm.ActionRequest) (int, any, error) {
			ids, err := h.selectInstances(tx, id.String(), ar.Body, true)
			if err != nil {
				return 0, nil, err
			}
			for _, vmID := range ids {
				tx.Delete(vmID)
			}
			return accepted(ar)
		}},
	}
}

// selectInstances resolves the instanceIds of an action body to instance IDs
// (all instances when the body has none and required is false).
func (h *handler) selectInstances(tx *arm.Tx, ssID string, body map[string]any, required bool) ([]string, error) {
	var req instanceIDs
	if body != nil {
		if err := decode(body, &req); err != nil {
			return nil, err
		}
	}
	if len(req.InstanceIDs) == 0 {
		if required {
			return nil, invalidParameter("instanceIds", "The instanceIds parameter is required.")
		}
		var all []string
		for _, d := range tx.List(TypeVMSSVM, ssID) {
			all = append(all, arm.Str(d, "id"))
		}
		return all, nil
	}
	var out []string
	for _, iid := range req.InstanceIDs {
		if _, ok := ParseInstanceID(iid); !ok {
			return nil, invalidParameter("instanceIds", "Virtual Machine Scale Set VM instanceId must be a number.")
		}
		vmID := ssID + "/virtualMachines/" + iid
		if !tx.Exists(vmID) {
			return nil, arm.Errorf(http.StatusNotFound, "NotFound", "The entity was not found in this Azure location: instance %s of %s.", iid, ssID)
		}
		out = append(out, vmID)
	}
	return out, nil
}
