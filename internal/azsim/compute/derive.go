package compute

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// derive maintains the read-only fields that follow VMs: availability set
// virtualMachines, NIC virtualMachine, disk managedBy / diskState. It runs
// after every write that touched a compute resource or a NIC, and only
// updates documents whose derived fields really change (so etags stay put).
func (h *handler) derive(tx *arm.Tx, changed []string) {
	relevant := false
	for _, k := range changed {
		if strings.Contains(k, "/providers/microsoft.compute/") || strings.Contains(k, "/providers/microsoft.network/networkinterfaces/") ||
			!strings.Contains(k, "/providers/") {
			relevant = true
			break
		}
	}
	if !relevant {
		return
	}
	asVMs := map[string][]string{} // availability set key → VM IDs
	nicVM := map[string]string{}   // NIC key → VM ID
	diskVM := map[string]string{}  // disk key → VM ID
	for _, vm := range tx.List(TypeVM, "") {
		vmID := arm.Str(vm, "id")
		if as := arm.Str(vm, "properties", "availabilitySet", "id"); as != "" {
			asVMs[arm.KeyOf(as)] = append(asVMs[arm.KeyOf(as)], vmID)
		}
		for _, nic := range arm.RefIDs(vm, "properties", "networkProfile", "networkInterfaces") {
			nicVM[arm.KeyOf(nic)] = vmID
		}
		addDataDisks(diskVM, vm, vmID)
	}
	disks := tx.List(TypeDisk, "")
	if len(disks) > 0 {
		// Scale sets can be large; only look at their instances when there
		// are disks they could hold.
		for _, vm := range tx.List(TypeVMSSVM, "") {
			addDataDisks(diskVM, vm, arm.Str(vm, "id"))
		}
	}

	for _, as := range tx.List(TypeAvailSet, "") {
		id := arm.Str(as, "id")
		want := asVMs[arm.KeyOf(id)]
		if sameIDs(arm.RefIDs(as, "properties", "virtualMachines"), want) {
			continue
		}
		_ = tx.Update(id, func(doc map[string]any) error {
			arm.Props(doc)["virtualMachines"] = arm.Refs(normIDsKeepCase(want))
			return nil
		})
	}
	for _, nic := range tx.List(TypeNIC, "") {
		id := arm.Str(nic, "id")
		want := nicVM[arm.KeyOf(id)]
		if strings.EqualFold(arm.Str(nic, "properties", "virtualMachine", "id"), want) {
			continue
		}
		_ = tx.Update(id, func(doc map[string]any) error {
			if want == "" {
				delete(arm.Props(doc), "virtualMachine")
			} else {
				arm.Props(doc)["virtualMachine"] = map[string]any{"id": want}
			}
			return nil
		})
	}
	for _, d := range disks {
		id := arm.Str(d, "id")
		want := diskVM[arm.KeyOf(id)]
		state := "Unattached"
		if want != "" {
			state = "Attached"
		}
		if arm.Str(d, "managedBy") == want && arm.Str(d, "properties", "diskState") == state {
			continue
		}
		_ = tx.Update(id, func(doc map[string]any) error {
			if want == "" {
				delete(doc, "managedBy")
			} else {
				doc["managedBy"] = want
			}
			arm.Props(doc)["diskState"] = state
			return nil
		})
	}
}

func addDataDisks(diskVM map[string]string, vm map[string]any, vmID string) {
	for _, dd := range arm.Arr(vm, "properties", "storageProfile", "dataDisks") {
		if id := arm.Str(dd, "managedDisk", "id"); id != "" {
			diskVM[arm.KeyOf(id)] = vmID
		}
	}
}

// normIDsKeepCase sorts IDs case-insensitively, keeping their casing.
func normIDsKeepCase(ids []string) []string {
	out := append([]string(nil), ids...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && strings.ToLower(out[j]) < strings.ToLower(out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// sameJSON compares two JSON values by their encoding.
func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}
