package compute

import (
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/network"
)

// prepareVMSSVM handles PUT on an existing Uniform instance (the CCM's
// partial body: location, etag, hardwareProfile, networkProfileConfiguration;
// merged into the stored model by the engine). Instances are created only by
// the scale set's capacity, so PUT on a missing one is 404.
func (h *handler) prepareVMSSVM(tx *arm.Tx, w *arm.Write) error {
	ssID, _ := w.ID.Parent()
	if w.IsCreate() {
		if _, ok := tx.Get(ssID.String()); !ok {
			return arm.NotFoundTopLevel(ssID)
		}
		return arm.Errorf(http.StatusNotFound, "NotFound", "The entity was not found in this Azure location: instance %s of %s.", w.ID.Name(), ssID.String())
	}
	var vm, old armcompute.VirtualMachineScaleSetVM
	if err := decode(w.Doc, &vm); err != nil {
		return err
	}
	if err := decode(w.Old, &old); err != nil {
		return err
	}
	// Identity, placement and runtime state are not the client's to change.
	vm.Name, vm.InstanceID, vm.Zones, vm.SKU = old.Name, old.InstanceID, old.Zones, old.SKU
	if vm.Properties == nil {
		vm.Properties = &armcompute.VirtualMachineScaleSetVMProperties{}
	}
	op := old.Properties
	vm.Properties.VMID, vm.Properties.TimeCreated, vm.Properties.InstanceView = op.VMID, op.TimeCreated, op.InstanceView
	vm.Properties.OSProfile = op.OSProfile
	vm.Properties.ModelDefinitionApplied = op.ModelDefinitionApplied
	if vm.Properties.NetworkProfileConfiguration != nil {
		DefaultNICConfigs(vm.Properties.NetworkProfileConfiguration.NetworkInterfaceConfigurations)
	}
	if err := checkScaleSetNetwork(tx, w.ID.String(), instanceIPConfigs(&vm)); err != nil {
		return err
	}
	if err := network.CheckNewPoolRefs(tx, instancePoolRefs(&old), instancePoolRefs(&vm)); err != nil {
		return err
	}
	if err := checkDataDisks(tx, w.ID.String(), vm.Properties.StorageProfile); err != nil {
		return err
	}
	SyncUniformNetworkProfile(&vm)
	if err := allocateInstanceIPs(tx, &vm); err != nil {
		return err
	}
	doc, err := encode(&vm)
	if err != nil {
		return err
	}
	w.Doc = doc
	return nil
}

// afterDeleteVMSSVM lowers the scale set's capacity when an instance is
// deleted on its own (DELETE or DeleteInstances), as Azure does.
func (h *handler) afterDeleteVMSSVM(tx *arm.Tx, id arm.ResourceID, doc map[string]any) {
	if h.scalingIn {
		return
	}
	ssID, _ := id.Parent()
	addCapacity(tx, ssID.String(), -1)
}

// ---- Network API views of instance NICs (api-version 2018-10-01) ----

// instanceNICDocs renders the NICs of one stored instance document.
func instanceNICDocs(tx *arm.Tx, doc map[string]any) ([]map[string]any, error) {
	var vm armcompute.VirtualMachineScaleSetVM
	if err := decode(doc, &vm); err != nil {
		return nil, err
	}
	ips := map[string]string{}
	for _, r := range instanceIPConfigs(&vm) {
		if r.SubnetID == "" {
			continue
		}
		// Idempotent: the owner keeps the address reserved when the
		// instance was created or updated.
		if ip, err := network.AllocatePrivateIPVersion(tx, r.SubnetID, ipConfigID(str(vm.ID), r), "", r.Version()); err == nil {
			ips[IPKey(r.NIC, r.IPConfig)] = ip
		}
	}
	var out []map[string]any
	for _, nic := range UniformNICs(&vm, ips) {
		d, err := encode(nic)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func (h *handler) getInstanceNIC(tx *arm.Tx, id arm.ResourceID) (map[string]any, error) {
	vmID, _ := id.Parent()
	doc, ok := tx.Get(vmID.String())
	if !ok {
		return nil, arm.NotFoundChild(id.String())
	}
	nics, err := instanceNICDocs(tx, doc)
	if err != nil {
		return nil, err
	}
	if i := arm.FindByName(nics, id.Name()); i >= 0 {
		return nics[i], nil
	}
	return nil, arm.NotFoundChild(id.String())
}

func (h *handler) listInstanceNICs(tx *arm.Tx, collection arm.ResourceID) ([]map[string]any, error) {
	vmID, _ := collection.Parent()
	doc, ok := tx.Get(vmID.String())
	if !ok {
		return nil, arm.NotFoundTopLevel(vmID)
	}
	return instanceNICDocs(tx, doc)
}

func (h *handler) listScaleSetNICs(tx *arm.Tx, collection arm.ResourceID) ([]map[string]any, error) {
	ssID, _ := collection.Parent()
	if _, ok := tx.Get(ssID.String()); !ok {
		return nil, arm.NotFoundTopLevel(ssID)
	}
	var out []map[string]any
	for _, d := range tx.List(TypeVMSSVM, ssID.String()) {
		nics, err := instanceNICDocs(tx, d)
		if err != nil {
			return nil, err
		}
		out = append(out, nics...)
	}
	return out, nil
}

// scaleSetIPConfigs feeds the ip configurations of every Uniform instance to
// the network deriver, which lists them in the pools' backendIPConfigurations
// and the subnets' ipConfigurations.
func (h *handler) scaleSetIPConfigs(tx *arm.Tx) []network.IPConfiguration {
	var out []network.IPConfiguration
	next := make(map[string]ipcCacheEntry, len(h.ipcCache))
	for _, doc := range tx.List(TypeVMSSVM, "") {
		vmID := arm.Str(doc, "id")
		etag := arm.Str(doc, "etag")
		if c, ok := h.ipcCache[vmID]; ok && c.etag == etag && etag != "" {
			next[vmID] = c
			out = append(out, c.cfgs...)
			continue
		}
		var cfgs []network.IPConfiguration
		complete := true
		for _, nic := range arm.Arr(doc, "properties", "networkProfileConfiguration", "networkInterfaceConfigurations") {
			for _, ipc := range arm.Arr(nic, "properties", "ipConfigurations") {
				p := arm.Obj(ipc, false, "properties")
				id := vmID + "/networkInterfaces/" + arm.Str(nic, "name") + "/ipConfigurations/" + arm.Str(ipc, "name")
				c := network.IPConfiguration{
					ID:       id,
					SubnetID: arm.Str(p, "subnet", "id"),
					PoolIDs:  arm.RefIDs(p, "loadBalancerBackendAddressPools"),
				}
				if c.SubnetID != "" {
					// Instance writes reserve the address; this runs after every write.
					if ip, ok := network.PrivateIPOf(tx, c.SubnetID, id); ok {
						c.PrivateIP = ip
					} else if ip, err := network.AllocatePrivateIPVersion(tx, c.SubnetID, id, "", arm.Str(p, "privateIPAddressVersion")); err == nil {
						c.PrivateIP = ip
					} else {
						complete = false
					}
				}
				cfgs = append(cfgs, c)
			}
		}
		if complete {
			next[vmID] = ipcCacheEntry{etag: etag, cfgs: cfgs}
		}
		out = append(out, cfgs...)
	}
	h.ipcCache = next
	return out
}

// instancePoolRefs maps an instance's ip configurations to the pools they reference.
func instancePoolRefs(vm *armcompute.VirtualMachineScaleSetVM) map[string][]string {
	out := map[string][]string{}
	for _, r := range instanceIPConfigs(vm) {
		out[ipConfigID(str(vm.ID), r)] = r.Pools
	}
	return out
}
