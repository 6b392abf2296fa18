package compute

import (
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// prepareAvailabilitySet validates an availability set (PUT is synchronous,
// 200 only). virtualMachines is read-only; the deriver maintains it.
func (h *handler) prepareAvailabilitySet(tx *arm.Tx, w *arm.Write) error {
	var as armcompute.AvailabilitySet
	if err := decode(w.Doc, &as); err != nil {
		return err
	}
	if as.Properties == nil {
		as.Properties = &armcompute.AvailabilitySetProperties{}
	}
	p := as.Properties
	if p.PlatformFaultDomainCount == nil {
		p.PlatformFaultDomainCount = to.Ptr[int32](2)
	}
	if p.PlatformUpdateDomainCount == nil {
		p.PlatformUpdateDomainCount = to.Ptr[int32](5)
	}
	if n := *p.PlatformFaultDomainCount; n < 1 || n > 3 {
		return invalidParameter("platformFaultDomainCount", "The specified fault domain count %d must fall in the range 1 to 3.", n)
	}
	if n := *p.PlatformUpdateDomainCount; n < 1 || n > 20 {
		return invalidParameter("platformUpdateDomainCount", "The specified update domain count %d must fall in the range 1 to 20.", n)
	}
	if w.IsCreate() {
		p.VirtualMachines = []*armcompute.SubResource{}
	} else {
		var old armcompute.AvailabilitySet
		if err := decode(w.Old, &old); err != nil {
			return err
		}
		p.VirtualMachines = old.Properties.VirtualMachines
	}
	doc, err := encode(&as)
	if err != nil {
		return err
	}
	w.Doc = doc
	return nil
}

// prepareDisk validates a managed disk write. managedBy and diskState are
// read-only and follow the VMs' data disks (see the deriver).
func (h *handler) prepareDisk(tx *arm.Tx, w *arm.Write) error {
	var d armcompute.Disk
	if err := decode(w.Doc, &d); err != nil {
		return err
	}
	if d.Properties == nil {
		d.Properties = &armcompute.DiskProperties{}
	}
	p := d.Properties
	if err := h.checkZones(str(d.Location), d.Zones, w.ID.Name()); err != nil {
		return err
	}
	if d.SKU == nil || d.SKU.Name == nil {
		d.SKU = &armcompute.DiskSKU{Name: to.Ptr(armcompute.DiskStorageAccountTypesStandardLRS)}
	}
	d.SKU.Tier = to.Ptr(diskTier(*d.SKU.Name))
	if p.CreationData == nil || p.CreationData.CreateOption == nil {
		return invalidParameter("creationData.createOption", "Required parameter 'creationData.createOption' is missing (null).")
	}
	if p.DiskSizeGB == nil && *p.CreationData.CreateOption == armcompute.DiskCreateOptionEmpty {
		return invalidParameter("diskSizeGB", "Disk size must be specified for an empty disk.")
	}
	d.ManagedBy = nil
	if w.IsCreate() {
		p.UniqueID = to.Ptr(arm.NewGUID())
		p.TimeCreated = to.Ptr(tx.Now().UTC())
		p.DiskState = to.Ptr(armcompute.DiskStateUnattached)
	} else {
		var old armcompute.Disk
		if err := decode(w.Old, &old); err != nil {
			return err
		}
		if !sameZones(old.Zones, d.Zones) {
			return arm.Errorf(http.StatusConflict, "PropertyChangeNotAllowed", "Changing property 'zones' is not allowed.")
		}
		if old.Properties.DiskSizeGB != nil && p.DiskSizeGB != nil && *p.DiskSizeGB < *old.Properties.DiskSizeGB {
			return arm.BadRequest("BadRequest", "Disk size reduction is not supported. Requested size: %d GB. Current size: %d GB.", *p.DiskSizeGB, *old.Properties.DiskSizeGB)
		}
		d.ManagedBy = old.ManagedBy
		p.UniqueID, p.TimeCreated, p.DiskState = old.Properties.UniqueID, old.Properties.TimeCreated, old.Properties.DiskState
	}
	DefaultDisk(&d)
	if p.DiskSizeGB != nil {
		p.DiskSizeBytes = to.Ptr(int64(*p.DiskSizeGB) << 30)
	}
	doc, err := encode(&d)
	if err != nil {
		return err
	}
	w.Doc = doc
	return nil
}

func diskTier(sku armcompute.DiskStorageAccountTypes) string {
	s := string(sku)
	switch {
	case strings.HasPrefix(s, "Premium"):
		return "Premium"
	case strings.HasPrefix(s, "UltraSSD"):
		return "Ultra"
	default:
		return "Standard"
	}
}

// beforeDeleteDisk refuses to delete an attached disk, as Azure does.
func (h *handler) beforeDeleteDisk(tx *arm.Tx, id arm.ResourceID, doc map[string]any) error {
	if by := arm.Str(doc, "managedBy"); by != "" {
		return arm.Errorf(http.StatusConflict, "OperationNotAllowed",
			"Disk %s is attached to VM %s.", id.Name(), by)
	}
	return nil
}
