// Package provisioner is the zone-aware managed disk provisioner: the Provisioner of
// sig-storage-lib-external-provisioner. It reads the StorageClass (disks.ParseClass), gathers the
// nodes' zones, lets disks/zonechoice decide, creates the disk in ARM and returns a PV that
// carries the zone labels and node affinity. Delete removes the disk of a released PV.
package provisioner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/disks"
	"github.com/azure-ccm/azure-ccm/internal/disks/zonechoice"
)

// DefaultName is the provisioner name StorageClasses use.
const DefaultName = "disk.azure-ccm.io"

// Event reasons on the PVC (besides the library's Provisioning/ProvisioningFailed/
// ProvisioningSucceeded and VolumeFailedDelete on the PV).
const (
	ReasonDiskCreated   = "DiskCreated"
	ReasonZoneChoice    = "ZoneChoiceFailed"
	ReasonInvalidClass  = "InvalidStorageClass"
	ReasonDiskFailed    = "DiskCreateFailed"
	ReasonDiskReused    = "DiskReused"
	ReasonDeleteRefused = "DiskDeleteRefused"
)

// Disks is what the provisioner needs from ARM (disks.Client in production).
type Disks interface {
	Get(ctx context.Context, id disks.DiskID) (*armcompute.Disk, error)
	Create(ctx context.Context, s disks.Spec) (*armcompute.Disk, error)
	Delete(ctx context.Context, id disks.DiskID) error
}

// Options configure New.
type Options struct {
	Disks          Disks
	SubscriptionID string
	// Location is the cluster's region (azure.json location); disks are created there.
	Location string
	// ResourceGroup is the default resource group of new disks (azure.json resourceGroup).
	ResourceGroup string
	Nodes         corelisters.NodeLister
	Recorder      record.EventRecorder
	Metrics       *Metrics
}

// Provisioner implements controller.Provisioner.
type Provisioner struct {
	o Options

	// The spread of claims over a class's zones (see turn): the next turn of each StorageClass,
	// and the turn already given to a claim whose disk is not created yet, so that a retry keeps
	// its zone and does not take another claim's turn.
	mu         sync.Mutex
	classTurns map[string]uint64
	claimTurns map[types.UID]claimTurn
}

type claimTurn struct {
	turn  uint64
	given time.Time
}

// claimTurnTTL bounds how long a claim's turn is remembered: a claim deleted while its disk
// creation was failing is never seen again.
const claimTurnTTL = time.Hour

var _ controller.Provisioner = (*Provisioner)(nil)

// New returns a provisioner.
func New(o Options) *Provisioner {
	if o.Metrics == nil {
		o.Metrics = NewMetrics()
	}
	return &Provisioner{o: o, classTurns: map[string]uint64{}, claimTurns: map[types.UID]claimTurn{}}
}

// Provision creates a disk for the claim. Errors are returned to the library, which records
// them as ProvisioningFailed events on the PVC and retries with backoff; the more specific
// reasons below are recorded as well.
func (p *Provisioner) Provision(ctx context.Context, opts controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	pv, state, err := p.provision(ctx, opts)
	p.o.Metrics.observeProvision(err)
	if state == controller.ProvisioningFinished {
		p.forgetTurn(opts.PVC.UID)
	}
	return pv, state, err
}

func (p *Provisioner) provision(ctx context.Context, opts controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	claim := opts.PVC
	class, err := disks.ParseClass(opts.StorageClass)
	if err != nil {
		p.event(claim, v1.EventTypeWarning, ReasonInvalidClass, "StorageClass %s: %v", opts.StorageClass.Name, err)
		return nil, controller.ProvisioningFinished, err
	}
	region := arm.NormalizeLocation(p.o.Location)
	rg := class.ResourceGroup
	if rg == "" {
		rg = p.o.ResourceGroup
	}
	id := disks.DiskID{SubscriptionID: p.o.SubscriptionID, ResourceGroup: rg, Name: opts.PVName}
	req := claim.Spec.Resources.Requests[v1.ResourceStorage]
	size := disks.SizeGiB(req.Value())

	// A previous attempt may have created the disk and then failed to save the PV: reuse it, in
	// the zone it has (another zone choice would now be a different, conflicting disk).
	disk, err := p.o.Disks.Get(ctx, id)
	if err != nil {
		p.event(claim, v1.EventTypeWarning, ReasonDiskFailed, "%v", err)
		return nil, controller.ProvisioningNoChange, err
	}
	if disk != nil {
		if owner := tag(disk, disks.TagCreatedForPVName); owner != opts.PVName {
			err := fmt.Errorf("disk %s already exists and was not created for PV %s (tag %s=%q)", id, opts.PVName, disks.TagCreatedForPVName, owner)
			p.event(claim, v1.EventTypeWarning, ReasonDiskFailed, "%v", err)
			return nil, controller.ProvisioningFinished, err
		}
		p.event(claim, v1.EventTypeNormal, ReasonDiskReused, "Disk %s from an earlier attempt reused (zones %v)", id, disks.ZonesOf(disk))
		return p.volume(opts, class, id, disk), controller.ProvisioningFinished, nil
	}

	in := class.ZoneInput()
	in.Region = region
	if in.NodeZones, err = p.nodeZones(); err != nil {
		return nil, controller.ProvisioningNoChange, err
	}
	if class.WaitForFirstConsumer && class.Zoned {
		in.SelectedNode = opts.SelectedNodeName
		if opts.SelectedNodeName != "" {
			node, err := p.o.Nodes.Get(opts.SelectedNodeName)
			if err != nil {
				err = fmt.Errorf("selected node %s: %w", opts.SelectedNodeName, err)
				p.event(claim, v1.EventTypeWarning, ReasonZoneChoice, "%v", err)
				return nil, controller.ProvisioningReschedule, err
			}
			in.SelectedNodeZone = node.Labels[v1.LabelTopologyZone]
		}
	}
	in.Seq = p.turn(opts.StorageClass.Name, claim)
	decision, err := zonechoice.Choose(in)
	if err != nil {
		p.event(claim, v1.EventTypeWarning, ReasonZoneChoice, "%v", err)
		p.o.Metrics.zoneChoiceErrors.WithLabelValues(errorKind(err)).Inc()
		if errors.Is(err, zonechoice.ErrNodeNotZoned) && opts.SelectedNodeName != "" {
			// Nothing was created: let the scheduler try another node.
			return nil, controller.ProvisioningReschedule, err
		}
		return nil, controller.ProvisioningFinished, err
	}
	spec := disks.Spec{ID: id, Location: p.o.Location, SKU: class.SKU, SizeGiB: size, Tags: map[string]string{
		disks.TagCreatedForPVCNamespace: claim.Namespace, disks.TagCreatedForPVCName: claim.Name, disks.TagCreatedForPVName: opts.PVName,
	}}
	if decision.Zone != "" {
		spec.ARMZone = zonechoice.ARMZone(decision.Zone)
	}
	disk, err = p.o.Disks.Create(ctx, spec)
	if err != nil {
		p.event(claim, v1.EventTypeWarning, ReasonDiskFailed, "%v", err)
		// The PUT may have been accepted: the library retries and the next attempt reuses it.
		return nil, controller.ProvisioningInBackground, err
	}
	zone := decision.Zone
	if zone == "" {
		zone = "none (non-zonal)"
	}
	p.event(claim, v1.EventTypeNormal, ReasonDiskCreated, "Created disk %s, %d GiB %s, zone %s (%s)", id, size, class.SKU, zone, decision.Rule)
	klog.InfoS("Created managed disk", "claim", klog.KObj(claim), "disk", id.String(), "zone", decision.Zone, "rule", decision.Rule, "sizeGiB", size, "sku", class.SKU)
	p.o.Metrics.disksCreated.WithLabelValues(ruleLabel(decision.Rule)).Inc()
	return p.volume(opts, class, id, disk), controller.ProvisioningFinished, nil
}

// volume is the PV of a disk: the CSI source of the Azure disk driver (its volume handle is
// the disk ID, what other tools expect), zone labels and the node affinity the scheduler
// honours for any volume source.
func (p *Provisioner) volume(opts controller.ProvisionOptions, class disks.Class, id disks.DiskID, disk *armcompute.Disk) *v1.PersistentVolume {
	size := int64(disks.SizeGiB(0))
	if disk.Properties != nil && disk.Properties.DiskSizeGB != nil {
		size = int64(*disk.Properties.DiskSizeGB)
	}
	loc := p.o.Location
	if disk.Location != nil {
		loc = *disk.Location
	}
	lbl := disks.Labels(loc, disks.ZonesOf(disk))
	reclaim := v1.PersistentVolumeReclaimDelete
	if opts.StorageClass.ReclaimPolicy != nil {
		reclaim = *opts.StorageClass.ReclaimPolicy
	}
	attrs := map[string]string{"skuName": class.SKU}
	if class.CachingMode != "" {
		attrs["cachingMode"] = class.CachingMode
	}
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: opts.PVName, Labels: lbl},
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: reclaim,
			AccessModes:                   opts.PVC.Spec.AccessModes,
			VolumeMode:                    opts.PVC.Spec.VolumeMode,
			MountOptions:                  opts.StorageClass.MountOptions,
			Capacity:                      v1.ResourceList{v1.ResourceStorage: *resource.NewQuantity(size<<30, resource.BinarySI)},
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
				Driver: disks.CSIDriver, VolumeHandle: id.String(), FSType: class.FSType, VolumeAttributes: attrs,
			}},
			NodeAffinity: disks.NodeAffinity(lbl),
		},
	}
}

// Delete deletes the disk of a released PV with reclaim policy Delete. A disk still attached is
// refused by ARM; the error becomes a VolumeFailedDelete event on the PV (and DiskDeleteRefused
// on the claim, if it still exists) and the library retries with backoff.
func (p *Provisioner) Delete(ctx context.Context, pv *v1.PersistentVolume) error {
	err := p.delete(ctx, pv)
	p.o.Metrics.observeDelete(err)
	return err
}

func (p *Provisioner) delete(ctx context.Context, pv *v1.PersistentVolume) error {
	kind, id, reason := disks.DiskOf(pv)
	if kind != disks.ManagedDisk {
		if reason == "" {
			reason = "not an Azure managed disk volume"
		}
		return &controller.IgnoredError{Reason: reason}
	}
	err := p.o.Disks.Delete(ctx, id)
	if err != nil {
		if ref := pv.Spec.ClaimRef; ref != nil && p.o.Recorder != nil {
			claim := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: ref.Namespace, UID: ref.UID}}
			p.event(claim, v1.EventTypeWarning, ReasonDeleteRefused, "PV %s: %v", pv.Name, err)
		}
		return err
	}
	klog.InfoS("Deleted managed disk", "pv", pv.Name, "disk", id.String())
	return nil
}

// turn is the claim's position in the spread over its class's zones. A StatefulSet-style name
// ("<template>-<statefulset>-<ordinal>") spreads by ordinal (zonechoice.SpreadIndex): the same
// answer for every attempt and independent of anything else being provisioned. Any other claim
// takes the next turn of its own StorageClass, once: claims of other classes provisioned at the
// same time, and retries of a claim, cannot make two claims of a class share a zone while
// another zone of the class is unused.
func (p *Provisioner) turn(class string, claim *v1.PersistentVolumeClaim) uint64 {
	if i, ok := zonechoice.SpreadIndex(claim.Name); ok {
		return i
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if t, ok := p.claimTurns[claim.UID]; ok && claim.UID != "" {
		return t.turn
	}
	for uid, t := range p.claimTurns {
		if now.Sub(t.given) > claimTurnTTL {
			delete(p.claimTurns, uid)
		}
	}
	t := p.classTurns[class]
	p.classTurns[class] = t + 1
	if claim.UID != "" {
		p.claimTurns[claim.UID] = claimTurn{turn: t, given: now}
	}
	return t
}

func (p *Provisioner) forgetTurn(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.claimTurns, uid)
}

// nodeZones are the zone labels of all nodes (the active zones are derived from them).
func (p *Provisioner) nodeZones() ([]string, error) {
	nodes, err := p.o.Nodes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	out := make([]string, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, n.Labels[v1.LabelTopologyZone])
	}
	return out, nil
}

func (p *Provisioner) event(obj *v1.PersistentVolumeClaim, typ, reason, format string, a ...any) {
	if p.o.Recorder != nil {
		p.o.Recorder.Eventf(obj, typ, reason, format, a...)
	}
}

func tag(d *armcompute.Disk, k string) string {
	for key, v := range d.Tags {
		if strings.EqualFold(key, k) && v != nil {
			return *v
		}
	}
	return ""
}

func errorKind(err error) string {
	switch {
	case errors.Is(err, zonechoice.ErrInvalidClass):
		return "invalid_class"
	case errors.Is(err, zonechoice.ErrNodeNotZoned):
		return "node_not_zoned"
	case errors.Is(err, zonechoice.ErrNoZonedNodes):
		return "no_zoned_nodes"
	}
	return "other"
}

func ruleLabel(rule string) string {
	switch rule {
	case zonechoice.RuleNonZonal:
		return "non_zonal"
	case zonechoice.RuleSelectedNode:
		return "selected_node"
	case zonechoice.RuleClassZones:
		return "class_zones"
	case zonechoice.RuleAllowed:
		return "allowed_topologies"
	case zonechoice.RuleRoundRobin:
		return "round_robin"
	}
	return "other"
}
