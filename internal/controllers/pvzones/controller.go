// Package pvzones is the pv-zone-labels controller (the existing provider's GetLabelsForVolume): it labels
// PersistentVolumes of Azure managed disks with topology.kubernetes.io/region and, for zonal
// disks, topology.kubernetes.io/zone = <region>-<n>, read from the disk in ARM, and adds the
// matching node affinity when the PV has none (spec.nodeAffinity cannot be changed once set).
// Blob (unmanaged) disks have no zone: they are left unlabelled with an event.
package pvzones

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/controllers/keyqueue"
	"github.com/azure-ccm/azure-ccm/internal/disks"
	"github.com/azure-ccm/azure-ccm/internal/tombstone"
)

// Event reasons (on the PV).
const (
	ReasonLabelled         = "ZoneLabelsAdded"
	ReasonUnmanaged        = "UnmanagedDiskNotLabelled"
	ReasonLookupFailed     = "DiskLookupFailed"
	ReasonDiskNotFound     = "DiskNotFound"
	ReasonAffinityKept     = "NodeAffinityKept"
	ReasonLabelPatchFailed = "ZoneLabelsFailed"
)

// DiskGetter reads a disk (disks.Client); a missing disk is (nil, nil).
type DiskGetter interface {
	Get(ctx context.Context, id disks.DiskID) (*armcompute.Disk, error)
}

// Options configure New.
type Options struct {
	Kube     kubernetes.Interface
	Volumes  coreinformers.PersistentVolumeInformer
	Disks    DiskGetter
	Recorder record.EventRecorder
	// Location is the cluster's region; a disk without a location falls back to it.
	Location string
	// Workers handle PVs in parallel (default 2). RetryBase/RetryMax bound the per-PV
	// exponential backoff after a failure (default 1s and 5m).
	Workers             int
	RetryBase, RetryMax time.Duration
}

// Controller labels PVs.
type Controller struct {
	o      Options
	lister corelisters.PersistentVolumeLister
	synced cache.InformerSynced
	queue  *keyqueue.Queue[string]

	// reported remembers PVs (by UID) already given the unmanaged-disk event, so resyncs do not
	// repeat it.
	mu       sync.Mutex
	reported map[types.UID]bool
}

// New wires the controller to the PV informer; Run starts it.
func New(o Options) (*Controller, error) {
	if o.Kube == nil || o.Volumes == nil || o.Disks == nil {
		return nil, fmt.Errorf("pvzones: Kube, Volumes and Disks are required")
	}
	if o.Workers <= 0 {
		o.Workers = 2
	}
	c := &Controller{o: o, lister: o.Volumes.Lister(), synced: o.Volumes.Informer().HasSynced, reported: map[types.UID]bool{}}
	c.queue = keyqueue.New(keyqueue.Options[string]{Name: "pv-zone-labels", RetryBase: o.RetryBase, RetryMax: o.RetryMax,
		Sync: c.syncObserved,
		Failed: func(name string, err error, retries int) {
			klog.ErrorS(err, "Labelling PV failed; retrying with backoff", "pv", name, "retries", retries)
		}})
	_, err := o.Volumes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: c.forget,
	})
	if err != nil {
		return nil, fmt.Errorf("pvzones: watching PVs: %w", err)
	}
	return c, nil
}

// forget drops a deleted PV from reported. A deletion the informer missed (a relist after a
// watch gap) arrives as a tombstone holding the last known PV: without unwrapping it, the PV's
// entry would stay for the life of the process.
func (c *Controller) forget(obj any) {
	pv, ok := tombstone.As[*v1.PersistentVolume](obj)
	if !ok {
		return
	}
	c.mu.Lock()
	delete(c.reported, pv.UID)
	c.mu.Unlock()
}

// wanted: an Azure disk PV not labelled yet. The region label marks a PV as done (the
// controller sets region and zone together), so resyncs make no ARM calls.
func wanted(pv *v1.PersistentVolume) bool {
	if kind, _, _ := disks.DiskOf(pv); kind == disks.NotAzureDisk {
		return false
	}
	_, done := pv.Labels[v1.LabelTopologyRegion]
	return !done && pv.DeletionTimestamp == nil
}

func (c *Controller) enqueue(obj any) {
	pv, ok := obj.(*v1.PersistentVolume)
	if !ok || !wanted(pv) {
		return
	}
	c.queue.Add(pv.Name)
}

// Run processes PVs until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	klog.InfoS("Starting PV zone labels controller")
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced) {
		return
	}
	c.queue.Start(ctx, c.o.Workers)
	<-ctx.Done()
}

// syncObserved is sync with its result and duration in the controller's metric.
func (c *Controller) syncObserved(ctx context.Context, name string) error {
	start := time.Now()
	result, err := c.sync(ctx, name)
	observe(result, time.Since(start))
	return err
}

// Result values of sync, the metric's result label.
const (
	ResultLabelled  = "labelled"
	ResultUnmanaged = "unmanaged"
	ResultSkipped   = "skipped"
	ResultNotFound  = "disk_not_found"
	ResultError     = "error"
)

func (c *Controller) sync(ctx context.Context, name string) (string, error) {
	pv, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return ResultSkipped, nil
	}
	if err != nil {
		return ResultError, err
	}
	if !wanted(pv) {
		return ResultSkipped, nil
	}
	kind, id, reason := disks.DiskOf(pv)
	if kind == disks.UnmanagedDisk {
		c.mu.Lock()
		first := !c.reported[pv.UID]
		c.reported[pv.UID] = true
		c.mu.Unlock()
		if first {
			c.o.Recorder.Eventf(pv, v1.EventTypeNormal, ReasonUnmanaged, "Not labelled with a zone: %s", reason)
		}
		return ResultUnmanaged, nil
	}
	disk, err := c.o.Disks.Get(ctx, id)
	if err != nil {
		c.o.Recorder.Eventf(pv, v1.EventTypeWarning, ReasonLookupFailed, "Reading disk %s for zone labels: %v", id, err)
		return ResultError, err
	}
	if disk == nil {
		c.o.Recorder.Eventf(pv, v1.EventTypeWarning, ReasonDiskNotFound, "Disk %s does not exist; retrying", id)
		return ResultNotFound, fmt.Errorf("disk %s not found", id)
	}
	loc := c.o.Location
	if disk.Location != nil {
		loc = *disk.Location
	}
	labels := disks.Labels(loc, disks.ZonesOf(disk))
	affinity := disks.NodeAffinity(labels)
	if pv.Spec.NodeAffinity != nil {
		// Immutable once set: keep what is there, and say so when it does not pin the zone.
		if affinity != nil && !mentionsZone(pv.Spec.NodeAffinity, labels[v1.LabelTopologyZone]) {
			c.o.Recorder.Eventf(pv, v1.EventTypeWarning, ReasonAffinityKept,
				"PV already has a node affinity that does not name zone %s; it is immutable and was kept", labels[v1.LabelTopologyZone])
		}
		affinity = nil
	}
	if err := c.patch(ctx, pv.Name, labels, affinity); err != nil {
		c.o.Recorder.Eventf(pv, v1.EventTypeWarning, ReasonLabelPatchFailed, "Setting zone labels %v: %v", labels, err)
		return ResultError, err
	}
	msg := fmt.Sprintf("Labels %v from disk %s", labels, id)
	if affinity != nil {
		msg += "; node affinity " + v1.LabelTopologyZone + " in [" + labels[v1.LabelTopologyZone] + "] added"
	}
	c.o.Recorder.Event(pv, v1.EventTypeNormal, ReasonLabelled, msg)
	klog.InfoS("Labelled PV with its disk's zone", "pv", pv.Name, "disk", id.String(), "labels", labels, "nodeAffinity", affinity != nil)
	return ResultLabelled, nil
}

// patch merges the labels (and the node affinity, which the API server only accepts while the
// PV has none) in one request.
func (c *Controller) patch(ctx context.Context, name string, labels map[string]string, affinity *v1.VolumeNodeAffinity) error {
	body := map[string]any{"metadata": map[string]any{"labels": labels}}
	if affinity != nil {
		body["spec"] = map[string]any{"nodeAffinity": affinity}
	}
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	_, err = c.o.Kube.CoreV1().PersistentVolumes().Patch(ctx, name, types.StrategicMergePatchType, data, metav1.PatchOptions{FieldManager: "pv-zone-labels"})
	return err
}

func mentionsZone(a *v1.VolumeNodeAffinity, zone string) bool {
	if a.Required == nil {
		return false
	}
	for _, t := range a.Required.NodeSelectorTerms {
		for _, e := range t.MatchExpressions {
			for _, v := range e.Values {
				if v == zone {
					return true
				}
			}
		}
	}
	return false
}
