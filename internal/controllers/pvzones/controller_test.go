package pvzones

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/azure-ccm/azure-ccm/internal/disks"
)

const sub = "sub"

// fakeDisks serves disks by name; failures[name] errors are returned first, one per call.
type fakeDisks struct {
	mu       sync.Mutex
	disks    map[string]*armcompute.Disk
	failures map[string][]error
	calls    map[string]int
}

func (f *fakeDisks) Get(_ context.Context, id disks.DiskID) (*armcompute.Disk, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[id.Name]++
	if errs := f.failures[id.Name]; len(errs) > 0 {
		f.failures[id.Name] = errs[1:]
		return nil, errs[0]
	}
	return f.disks[id.Name], nil
}

func (f *fakeDisks) callCount(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[name]
}

func disk(name string, zones ...string) *armcompute.Disk {
	d := &armcompute.Disk{Name: to.Ptr(name), Location: to.Ptr("eastus")}
	for _, z := range zones {
		d.Zones = append(d.Zones, to.Ptr(z))
	}
	return d
}

func diskID(name string) string {
	return disks.DiskID{SubscriptionID: sub, ResourceGroup: "rg", Name: name}.String()
}

func csiPV(name, disk string) *v1.PersistentVolume {
	return &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "uid-" + "name"}, Spec: v1.PersistentVolumeSpec{
		PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: disks.CSIDriver, VolumeHandle: diskID(disk)}}}}
}

func inTreePV(name, disk string) *v1.PersistentVolume {
	kind := v1.AzureManagedDisk
	return &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PersistentVolumeSpec{
		PersistentVolumeSource: v1.PersistentVolumeSource{AzureDisk: &v1.AzureDiskVolumeSource{DiskName: disk, DataDiskURI: diskID(disk), Kind: &kind}}}}
}

func TestController(t *testing.T) {
	blobKind := v1.AzureDedicatedBlobDisk
	blob := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-blob"}, Spec: v1.PersistentVolumeSpec{
		PersistentVolumeSource: v1.PersistentVolumeSource{AzureDisk: &v1.AzureDiskVolumeSource{DiskName: "b", DataDiskURI: "https://a.blob.core.windows.net/vhds/b.vhd", Kind: &blobKind}}}}
	withAffinity := csiPV("pv-affinity", "d-affinity")
	withAffinity.Spec.NodeAffinity = &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
		MatchExpressions: []v1.NodeSelectorRequirement{{Key: "topology.disk.csi.azure.com/zone", Operator: v1.NodeSelectorOpIn, Values: []string{"eastus-9"}}}}}}}
	done := csiPV("pv-done", "d-done")
	done.Labels = map[string]string{v1.LabelTopologyRegion: "eastus"}
	hostPath := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-host"}, Spec: v1.PersistentVolumeSpec{
		PersistentVolumeSource: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/x"}}}}

	fd := &fakeDisks{calls: map[string]int{}, disks: map[string]*armcompute.Disk{
		"d-zonal": disk("d-zonal", "2"), "d-intree": disk("d-intree", "3"), "d-regional": disk("d-regional"),
		"d-affinity": disk("d-affinity", "1"), "d-flaky": disk("d-flaky", "1"), "d-done": disk("d-done", "1"),
	}, failures: map[string][]error{"d-flaky": {errors.New("ARM 503"), errors.New("ARM 503")}}}

	kube := fake.NewClientset(csiPV("pv-zonal", "d-zonal"), inTreePV("pv-intree", "d-intree"), csiPV("pv-regional", "d-regional"),
		withAffinity, csiPV("pv-flaky", "d-flaky"), csiPV("pv-missing", "d-missing"), blob, done, hostPath)
	factory := informers.NewSharedInformerFactory(kube, 0)
	rec := record.NewFakeRecorder(200)
	c, err := New(Options{Kube: kube, Volumes: factory.Core().V1().PersistentVolumes(), Disks: fd, Recorder: rec,
		Location: "eastus", RetryBase: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	go c.Run(ctx)

	get := func(name string) *v1.PersistentVolume {
		pv, err := kube.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return pv
	}
	waitLabel := func(name, key, want string) *v1.PersistentVolume {
		t.Helper()
		var pv *v1.PersistentVolume
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			pv = get(name)
			return pv.Labels[key] == want, nil
		}); err != nil {
			t.Fatalf("%s: label %s=%q never set (labels %v)", name, key, want, pv.Labels)
		}
		return pv
	}
	zoneOf := func(pv *v1.PersistentVolume) string {
		if pv.Spec.NodeAffinity == nil {
			return ""
		}
		e := pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0]
		return e.Key + "=" + strings.Join(e.Values, ",")
	}

	pv := waitLabel("pv-zonal", v1.LabelTopologyZone, "eastus-2")
	if pv.Labels[v1.LabelTopologyRegion] != "eastus" || zoneOf(pv) != v1.LabelTopologyZone+"=eastus-2" {
		t.Fatalf("zonal CSI PV: %v %s", pv.Labels, zoneOf(pv))
	}
	pv = waitLabel("pv-intree", v1.LabelTopologyZone, "eastus-3")
	if zoneOf(pv) != v1.LabelTopologyZone+"=eastus-3" {
		t.Fatalf("in-tree PV affinity %s", zoneOf(pv))
	}
	pv = waitLabel("pv-regional", v1.LabelTopologyRegion, "eastus")
	if _, ok := pv.Labels[v1.LabelTopologyZone]; ok || pv.Spec.NodeAffinity != nil {
		t.Fatalf("regional disk PV got a zone: %v", pv.Labels)
	}
	pv = waitLabel("pv-affinity", v1.LabelTopologyZone, "eastus-1")
	if zoneOf(pv) != "topology.disk.csi.azure.com/zone=eastus-9" {
		t.Fatalf("existing node affinity changed: %s", zoneOf(pv))
	}
	waitLabel("pv-flaky", v1.LabelTopologyZone, "eastus-1")
	if n := fd.callCount("d-flaky"); n != 3 {
		t.Fatalf("flaky disk read %d times, want 2 failures + 1 success", n)
	}

	// Events: labelled, affinity kept, lookup failures, missing disk, blob disk (once).
	want := map[string]bool{ReasonLabelled: false, ReasonAffinityKept: false, ReasonLookupFailed: false, ReasonDiskNotFound: false, ReasonUnmanaged: false}
	deadline := time.After(10 * time.Second)
	for missing := len(want); missing > 0; {
		select {
		case ev := <-rec.Events:
			for r, seen := range want {
				if !seen && strings.Contains(ev, " "+r+" ") {
					want[r] = true
					missing--
				}
			}
		case <-deadline:
			t.Fatalf("events not seen: %v", want)
		}
	}
	if l := get("pv-blob").Labels; len(l) != 0 {
		t.Fatalf("blob disk PV labelled: %v", l)
	}
	if fd.callCount("d-done") != 0 {
		t.Fatal("an already labelled PV was looked up in ARM")
	}
	if l := get("pv-host").Labels; len(l) != 0 {
		t.Fatalf("hostPath PV labelled: %v", l)
	}
	// The missing disk is retried with backoff.
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return fd.callCount("d-missing") >= 3, nil
	}); err != nil {
		t.Fatal("missing disk not retried")
	}
}

// TestForgetDeletedPVs: a deleted PV leaves reported whether the informer saw the deletion or
// only a tombstone of it (a relist after a missed watch event); anything else changes nothing.
func TestForgetDeletedPVs(t *testing.T) {
	pv := func(uid string) *v1.PersistentVolume {
		return &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + uid, UID: types.UID(uid)}}
	}
	for _, tc := range []struct {
		name string
		obj  any
		left []types.UID
	}{
		{"the PV", pv("a"), []types.UID{"b"}},
		{"a tombstone of the PV", cache.DeletedFinalStateUnknown{Key: "pv-a", Obj: pv("a")}, []types.UID{"b"}},
		{"a tombstone of something else", cache.DeletedFinalStateUnknown{Key: "x", Obj: "not a PV"}, []types.UID{"a", "b"}},
		{"an unknown PV", pv("c"), []types.UID{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Controller{reported: map[types.UID]bool{"a": true, "b": true}}
			c.forget(tc.obj)
			var left []types.UID
			for uid := range c.reported {
				left = append(left, uid)
			}
			slices.Sort(left)
			if !slices.Equal(left, tc.left) {
				t.Fatalf("reported %v after the deletion, want %v", left, tc.left)
			}
		})
	}
}
