package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/disks"
	"github.com/azure-ccm/azure-ccm/internal/disks/provisioner"
	"github.com/azure-ccm/azure-ccm/internal/disks/zonechoice"
	"github.com/azure-ccm/azure-ccm/test/framework"
)

// disksEnv is a cluster of six zonal nodes (two per zone of eastus) initialised by the CCM
// (which also runs pv-zone-labels), the provisioner binary, and ARM clients for the checks.
type disksEnv struct {
	*framework.Env
	disks   *disks.Client
	clients *arm.Clients
	region  string
	zoneOf  map[string]string // node -> zone label
	attach  string            // a standalone VM (not a node) in zone 2 to attach disks to
}

func disksStart(t *testing.T) *disksEnv {
	t.Helper()
	bin := nodesRequireBinary(t, "azure-disk-provisioner")
	topo := framework.DefaultTopology()
	topo.ScaleSets[0].Capacity = 6
	topo.VirtualMachines = []topology.VirtualMachine{{ResourceGroup: "rg-cluster", Name: "attach-vm", Zone: "2"}}
	e := framework.Start(t, framework.Options{Topology: topo})
	var nodeMachines []framework.Machine
	for _, m := range e.Machines {
		if m.ScaleSet != "" {
			nodeMachines = append(nodeMachines, m)
		}
	}
	e.CreateNodes(framework.NodeOptions{ProviderID: true}, nodeMachines...)
	e.StartCCM()
	d := &disksEnv{Env: e, region: arm.NormalizeLocation(e.Azure.Location), zoneOf: map[string]string{}, attach: "attach-vm"}
	for _, m := range nodeMachines {
		e.WaitFor("node "+m.NodeName+" initialised", nodesInitialized(e, m), 2*time.Minute)
		d.zoneOf[m.NodeName] = d.region + "-" + m.Zone
	}
	if got := len(zonechoice.ActiveZones(d.region, values(d.zoneOf))); got != 3 {
		t.Fatalf("nodes span %d zones, want 3: %v", got, d.zoneOf)
	}

	data, err := os.ReadFile(e.CloudConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if d.clients, err = arm.New(ctx, cfg, arm.Options{Transport: e.Azure.Server.HTTPClient(), Metrics: arm.NewMetrics(), PollFrequency: 100 * time.Millisecond,
		// The test attaches disks itself: its calls are not the CCM's (the role check tells programs by User-Agent).
		ApplicationID: "e2e-tests"}); err != nil {
		t.Fatal(err)
	}
	d.disks = disks.NewClient(d.clients)

	logPath := filepath.Join(e.Dir, "logs", "azure-disk-provisioner.log")
	p, err := framework.StartProcess(framework.ProcessSpec{Name: "azure-disk-provisioner", Path: bin, LogPath: logPath,
		Args: []string{"--kubeconfig=" + e.Kubeconfig, "--cloud-config=" + e.CloudConfigPath, "--leader-elect=false", "--v=4"},
		Env:  []string{"SSL_CERT_FILE=" + e.Azure.CAFile}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Stop(5 * time.Second)
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				_ = os.MkdirAll(e.ArtifactsDir(), 0o755)
				_ = os.WriteFile(filepath.Join(e.ArtifactsDir(), "azure-disk-provisioner.log"), b, 0o644)
			}
		}
	})
	return d
}

func values(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func (d *disksEnv) class(t *testing.T, name string, params map[string]string, wffc bool, allowed ...string) {
	t.Helper()
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner.DefaultName, Parameters: params}
	mode := storagev1.VolumeBindingImmediate
	if wffc {
		mode = storagev1.VolumeBindingWaitForFirstConsumer
	}
	sc.VolumeBindingMode = &mode
	if len(allowed) > 0 {
		sc.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: corev1.LabelTopologyZone, Values: allowed}}}}
	}
	if _, err := d.Kube.StorageV1().StorageClasses().Create(context.Background(), sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (d *disksEnv) claim(t *testing.T, name, class, size string) {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{
		StorageClassName: &class, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}}}
	if _, err := d.Kube.CoreV1().PersistentVolumeClaims("default").Create(context.Background(), pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// pod uses the claim; nodeSelector (optional) pins it to a node.
func (d *disksEnv) pod(t *testing.T, name, claim string, nodeSelector map[string]string) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{
		NodeSelector: nodeSelector,
		Containers:   []corev1.Container{{Name: "c", Image: "busybox", VolumeMounts: []corev1.VolumeMount{{Name: "v", MountPath: "/data"}}}},
		Volumes:      []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
	}}
	d.WaitFor("service account default/default", d.DefaultServiceAccount("default"), time.Minute)
	if _, err := d.Kube.CoreV1().Pods("default").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// bound waits for the claim's PV and returns it.
func (d *disksEnv) bound(t *testing.T, claim string) *corev1.PersistentVolume {
	t.Helper()
	var pv *corev1.PersistentVolume
	d.WaitFor("claim "+claim+" bound", func(ctx context.Context) (bool, error) {
		pvc, err := d.Kube.CoreV1().PersistentVolumeClaims("default").Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if pvc.Status.Phase != corev1.ClaimBound {
			return false, fmt.Errorf("claim is %s", pvc.Status.Phase)
		}
		pv, err = d.Kube.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		return err == nil, err
	}, 2*time.Minute)
	return pv
}

// diskZone checks the PV against its disk in azsim and returns the zone label ("" non-zonal).
func (d *disksEnv) diskZone(t *testing.T, pv *corev1.PersistentVolume) string {
	t.Helper()
	kind, id, reason := disks.DiskOf(pv)
	if kind != disks.ManagedDisk {
		t.Fatalf("PV %s is not a managed disk volume: %s", pv.Name, reason)
	}
	disk, err := d.disks.Get(context.Background(), id)
	if err != nil || disk == nil {
		t.Fatalf("disk %s of PV %s in azsim: %v (exists %v)", id, pv.Name, err, disk != nil)
	}
	want := ""
	if z := disks.ZonesOf(disk); len(z) > 0 {
		want = d.region + "-" + z[0]
	}
	if pv.Labels[corev1.LabelTopologyZone] != want || pv.Labels[corev1.LabelTopologyRegion] != d.region {
		t.Fatalf("PV %s labels %v, disk zone %q", pv.Name, pv.Labels, want)
	}
	if got := affinityZone(pv); got != want {
		t.Fatalf("PV %s node affinity zone %q, disk zone %q", pv.Name, got, want)
	}
	return want
}

func affinityZone(pv *corev1.PersistentVolume) string {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return ""
	}
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if e.Key == corev1.LabelTopologyZone && len(e.Values) == 1 {
				return e.Values[0]
			}
		}
	}
	return ""
}

// scheduledTo waits for the pod to be bound to a node and returns the node.
func (d *disksEnv) scheduledTo(t *testing.T, pod string) string {
	t.Helper()
	node := ""
	d.WaitFor("pod "+pod+" scheduled", func(ctx context.Context) (bool, error) {
		p, err := d.Kube.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		node = p.Spec.NodeName
		return node != "", fmt.Errorf("pod %s not scheduled (%s)", pod, p.Status.Phase)
	}, 2*time.Minute)
	return node
}

// event waits for an event on the object whose reason is one of reasons and whose message
// contains text.
func (d *disksEnv) event(t *testing.T, kind, namespace, name, text string, reasons ...string) {
	t.Helper()
	d.WaitFor(fmt.Sprintf("event %v on %s %s", reasons, kind, name), func(ctx context.Context) (bool, error) {
		evs, err := d.Kube.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return false, err
		}
		var seen []string
		for _, ev := range evs.Items {
			if ev.InvolvedObject.Kind != kind {
				continue
			}
			seen = append(seen, ev.Reason+": "+ev.Message)
			for _, r := range reasons {
				if ev.Reason == r && strings.Contains(ev.Message, text) {
					return true, nil
				}
			}
		}
		return false, fmt.Errorf("events: %v", seen)
	}, 2*time.Minute)
}

func (d *disksEnv) createDisk(t *testing.T, name, zone string) disks.DiskID {
	t.Helper()
	id := disks.DiskID{SubscriptionID: d.clients.Config.SubscriptionID, ResourceGroup: d.clients.Config.ResourceGroup, Name: name}
	if _, err := d.disks.Create(context.Background(), disks.Spec{ID: id, Location: d.Azure.Location, ARMZone: zone, SKU: "Premium_LRS", SizeGiB: 4}); err != nil {
		t.Fatal(err)
	}
	return id
}

// setAttached attaches the disk to the standalone VM (or detaches everything).
func (d *disksEnv) setAttached(t *testing.T, id disks.DiskID, on bool) {
	t.Helper()
	ctx := context.Background()
	vms := d.clients.Compute.NewVirtualMachinesClient()
	vm, err := vms.Get(ctx, d.clients.Config.ResourceGroup, d.attach, nil)
	if err != nil {
		t.Fatal(err)
	}
	if vm.Properties.StorageProfile == nil {
		vm.Properties.StorageProfile = &armcompute.StorageProfile{}
	}
	vm.Properties.StorageProfile.DataDisks = []*armcompute.DataDisk{}
	if on {
		vm.Properties.StorageProfile.DataDisks = []*armcompute.DataDisk{{Lun: to.Ptr[int32](0), Name: to.Ptr(id.Name),
			CreateOption: to.Ptr(armcompute.DiskCreateOptionTypesAttach), ManagedDisk: &armcompute.ManagedDiskParameters{ID: to.Ptr(id.String())}}}
	}
	p, err := vms.BeginCreateOrUpdate(ctx, d.clients.Config.ResourceGroup, d.attach, vm.VirtualMachine, nil)
	if err == nil {
		_, err = p.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: 100 * time.Millisecond})
	}
	if err != nil {
		t.Fatal(err)
	}
}

func (d *disksEnv) diskGone(id disks.DiskID) framework.Condition {
	return func(ctx context.Context) (bool, error) {
		disk, err := d.disks.Get(ctx, id)
		if err != nil {
			return false, err
		}
		return disk == nil, fmt.Errorf("disk %s still exists", id.Name)
	}
}

func (d *disksEnv) pvGone(name string) framework.Condition {
	return func(ctx context.Context) (bool, error) {
		_, err := d.Kube.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("PV %s still exists (%v)", name, err)
	}
}

// TestDisks: zone-aware provisioning of every StorageClass variant against azsim, scheduling of
// pods to the zone of their disk by the real scheduler, zone labels of pre-existing disks'
// PVs by the CCM's pv-zone-labels controller, and deletion of disks with their PVs.
func TestDisks(t *testing.T) {
	working(t)
	d := disksStart(t)
	ctx := context.Background()
	z := func(n int) string { return fmt.Sprintf("%s-%d", d.region, n) }

	d.class(t, "rr", map[string]string{"kind": "Managed", "storageaccounttype": "Premium_LRS"}, false)
	d.class(t, "zone2", map[string]string{"zone": z(2)}, false)
	d.class(t, "zones13", map[string]string{"zones": z(1) + "," + z(3)}, false)
	d.class(t, "topo3", nil, false, z(3))
	d.class(t, "regional", map[string]string{"zoned": "false", "skuname": "Standard_LRS"}, false)
	d.class(t, "wffc", map[string]string{"storageaccounttype": "StandardSSD_LRS"}, true)
	d.class(t, "bad-wffc-zone", map[string]string{"zone": z(1)}, true)
	d.class(t, "bad-both", map[string]string{"zones": z(1)}, false, z(2))

	t.Run("round-robin spreads claims evenly", func(t *testing.T) {
		for i := 0; i < 6; i++ {
			d.claim(t, fmt.Sprintf("rr-%d", i), "rr", "3Gi")
		}
		count := map[string]int{}
		for i := 0; i < 6; i++ {
			count[d.diskZone(t, d.bound(t, fmt.Sprintf("rr-%d", i)))]++
		}
		if len(count) != 3 || count[z(1)] != 2 || count[z(2)] != 2 || count[z(3)] != 2 {
			t.Fatalf("6 claims over 3 zones: %v", count)
		}
	})

	t.Run("class zone, zones, allowedTopologies, zoned=false", func(t *testing.T) {
		for _, c := range []struct{ claim, class, size string }{
			{"c-zone2", "zone2", "1Gi"}, {"c-zones-a", "zones13", "1Gi"}, {"c-zones-b", "zones13", "1Gi"},
			{"c-topo3", "topo3", "1Gi"}, {"c-regional", "regional", "1500Mi"},
		} {
			d.claim(t, c.claim, c.class, c.size)
		}
		if got := d.diskZone(t, d.bound(t, "c-zone2")); got != z(2) {
			t.Fatalf("zone class: %s", got)
		}
		a, b := d.diskZone(t, d.bound(t, "c-zones-a")), d.diskZone(t, d.bound(t, "c-zones-b"))
		if (a != z(1) && a != z(3)) || (b != z(1) && b != z(3)) || a == b {
			t.Fatalf("zones class: %s, %s (want one each of %s, %s)", a, b, z(1), z(3))
		}
		if got := d.diskZone(t, d.bound(t, "c-topo3")); got != z(3) {
			t.Fatalf("allowedTopologies class: %s", got)
		}
		pv := d.bound(t, "c-regional")
		if got := d.diskZone(t, pv); got != "" {
			t.Fatalf("zoned=false class: %s", got)
		}
		if q := pv.Spec.Capacity[corev1.ResourceStorage]; q.Value() != 2<<30 {
			t.Fatalf("1500Mi rounds up to 2Gi, PV has %s", q.String())
		}
	})

	t.Run("pods of a zonal PV only go to nodes of its zone", func(t *testing.T) {
		for i := 0; i < 4; i++ {
			d.pod(t, fmt.Sprintf("zone2-%d", i), "c-zone2", nil)
		}
		for i := 0; i < 4; i++ {
			if node := d.scheduledTo(t, fmt.Sprintf("zone2-%d", i)); d.zoneOf[node] != z(2) {
				t.Fatalf("pod of a %s disk scheduled to %s in %s", z(2), node, d.zoneOf[node])
			}
		}
		// Forced into zone 1 it cannot be scheduled: the scheduler reports the volume's affinity.
		d.pod(t, "zone2-in-zone1", "c-zone2", map[string]string{corev1.LabelTopologyZone: z(1)})
		d.WaitFor("pod zone2-in-zone1 unschedulable", func(ctx context.Context) (bool, error) {
			p, err := d.Kube.CoreV1().Pods("default").Get(ctx, "zone2-in-zone1", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if p.Spec.NodeName != "" {
				t.Fatalf("scheduled to %s", p.Spec.NodeName)
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable && strings.Contains(c.Message, "node affinity") {
					return true, nil
				}
			}
			return false, fmt.Errorf("conditions %+v", p.Status.Conditions)
		}, time.Minute)
	})

	t.Run("WaitForFirstConsumer uses the selected node's zone", func(t *testing.T) {
		for i, zone := range []int{1, 3} {
			name := fmt.Sprintf("wffc-%d", i)
			d.claim(t, name, "wffc", "1Gi")
			d.pod(t, name, name, map[string]string{corev1.LabelTopologyZone: z(zone)})
			node := d.scheduledTo(t, name)
			if got := d.diskZone(t, d.bound(t, name)); got != d.zoneOf[node] || got != z(zone) {
				t.Fatalf("WFFC disk in %s, pod on %s in %s", got, node, d.zoneOf[node])
			}
		}
	})

	t.Run("class errors are events on the claim", func(t *testing.T) {
		d.claim(t, "bad-wffc", "bad-wffc-zone", "1Gi")
		d.pod(t, "bad-wffc", "bad-wffc", nil)
		d.event(t, "PersistentVolumeClaim", "default", "bad-wffc", "WaitForFirstConsumer", provisioner.ReasonZoneChoice)
		d.claim(t, "bad-both", "bad-both", "1Gi")
		d.event(t, "PersistentVolumeClaim", "default", "bad-both", "both", provisioner.ReasonZoneChoice)
		d.event(t, "PersistentVolumeClaim", "default", "bad-both", "both", "ProvisioningFailed")
	})

	t.Run("pre-existing disks get zone labels from the CCM", func(t *testing.T) {
		zonal := d.createDisk(t, "pre-zonal", "1")
		regional := d.createDisk(t, "pre-regional", "")
		csi := d.createDisk(t, "pre-csi", "3")
		managed, blob := corev1.AzureManagedDisk, corev1.AzureSharedBlobDisk
		pvs := []*corev1.PersistentVolume{
			{ObjectMeta: metav1.ObjectMeta{Name: "pre-zonal"}, Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
				AzureDisk: &corev1.AzureDiskVolumeSource{DiskName: zonal.Name, DataDiskURI: zonal.String(), Kind: &managed}}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "pre-regional"}, Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
				AzureDisk: &corev1.AzureDiskVolumeSource{DiskName: regional.Name, DataDiskURI: regional.String(), Kind: &managed}}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "pre-csi"}, Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
				CSI: &corev1.CSIPersistentVolumeSource{Driver: disks.CSIDriver, VolumeHandle: csi.String()}}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "pre-blob"}, Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
				AzureDisk: &corev1.AzureDiskVolumeSource{DiskName: "blob", DataDiskURI: "https://acct.blob.core.windows.net/vhds/blob.vhd", Kind: &blob}}}},
		}
		for _, pv := range pvs {
			pv.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("4Gi")}
			pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
			pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
			if _, err := d.Kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		labelled := func(name string) *corev1.PersistentVolume {
			var pv *corev1.PersistentVolume
			d.WaitFor("PV "+name+" labelled", func(ctx context.Context) (bool, error) {
				var err error
				pv, err = d.Kube.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				_, ok := pv.Labels[corev1.LabelTopologyRegion]
				return ok, fmt.Errorf("labels %v", pv.Labels)
			}, time.Minute)
			return pv
		}
		if got := d.diskZone(t, labelled("pre-zonal")); got != z(1) {
			t.Fatalf("pre-existing zonal disk: %s", got)
		}
		if got := d.diskZone(t, labelled("pre-regional")); got != "" {
			t.Fatalf("pre-existing regional disk: %s", got)
		}
		if got := d.diskZone(t, labelled("pre-csi")); got != z(3) {
			t.Fatalf("pre-existing CSI disk: %s", got)
		}
		d.event(t, "PersistentVolume", "", "pre-zonal", "node affinity", "ZoneLabelsAdded")
		d.event(t, "PersistentVolume", "", "pre-blob", "blob disk", "UnmanagedDiskNotLabelled")
		pv, err := d.Kube.CoreV1().PersistentVolumes().Get(ctx, "pre-blob", metav1.GetOptions{})
		if err != nil || len(pv.Labels) != 0 {
			t.Fatalf("blob disk PV labelled: %v %v", pv.Labels, err)
		}
	})

	t.Run("deleting claims deletes the disks", func(t *testing.T) {
		var ids []disks.DiskID
		var pvNames []string
		for i := 0; i < 6; i++ {
			pv := d.bound(t, fmt.Sprintf("rr-%d", i))
			_, id, _ := disks.DiskOf(pv)
			ids, pvNames = append(ids, id), append(pvNames, pv.Name)
			if err := d.Kube.CoreV1().PersistentVolumeClaims("default").Delete(ctx, fmt.Sprintf("rr-%d", i), metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range ids {
			d.WaitFor("disk "+ids[i].Name+" deleted", d.diskGone(ids[i]), 2*time.Minute)
			d.WaitFor("PV "+pvNames[i]+" deleted", d.pvGone(pvNames[i]), time.Minute)
		}
	})

	t.Run("an attached disk is not deleted until detached", func(t *testing.T) {
		pv := d.bound(t, "c-zone2")
		_, id, _ := disks.DiskOf(pv)
		d.setAttached(t, id, true)
		for i := 0; i < 4; i++ {
			_ = d.Kube.CoreV1().Pods("default").Delete(ctx, fmt.Sprintf("zone2-%d", i), metav1.DeleteOptions{})
		}
		_ = d.Kube.CoreV1().Pods("default").Delete(ctx, "zone2-in-zone1", metav1.DeleteOptions{})
		if err := d.Kube.CoreV1().PersistentVolumeClaims("default").Delete(ctx, "c-zone2", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		d.event(t, "PersistentVolume", "", pv.Name, "attached", "VolumeFailedDelete")
		if disk, err := d.disks.Get(ctx, id); err != nil || disk == nil {
			t.Fatalf("attached disk deleted: %v", err)
		}
		d.setAttached(t, id, false)
		d.WaitFor("detached disk "+id.Name+" deleted", d.diskGone(id), 3*time.Minute)
		d.WaitFor("PV "+pv.Name+" deleted", d.pvGone(pv.Name), time.Minute)
	})
}
