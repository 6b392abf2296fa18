package provisioner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/server"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/disks"
)

type simEnv struct {
	clients *arm.Clients
	disks   *disks.Client
	sub     string
}

// startSim runs azsim in-process with one zonal VM (to attach disks to) and returns ARM clients.
func startSim(t *testing.T) *simEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sim, err := server.Start(context.Background(), server.Options{IMDSAddr: "off"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	res, err := sim.Seed(ctx, &topology.Topology{
		Location: "eastus", ResourceGroups: []string{"rg"},
		VirtualNetworks: []topology.VirtualNetwork{{ResourceGroup: "rg", Name: "vnet", AddressPrefixes: []string{"10.0.0.0/8"},
			Subnets: []topology.Subnet{{Name: "nodes", AddressPrefix: "10.240.0.0/16"}}}},
		VirtualMachines: []topology.VirtualMachine{{ResourceGroup: "rg", Name: "vm1", Zone: "2"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf(`{"cloud":"AzureStackCloud","disableAzureStackCloud":true,"tenantId":%q,"subscriptionId":%q,
		"aadClientId":%q,"aadClientSecret":%q,"resourceGroup":"rg","location":"eastus","vmType":"standard"}`,
		server.DefaultTenantID, res.SubscriptionID, server.DefaultClientID, server.DefaultClientSecret)), nil)
	if err != nil {
		t.Fatal(err)
	}
	env, err := config.ResolveEnvironment(ctx, cfg, sim.LookupEnvironmentFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	clients, err := arm.New(ctx, cfg, arm.Options{Transport: sim.HTTPClient(), Environment: &env, Metrics: arm.NewMetrics(), PollFrequency: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return &simEnv{clients: clients, disks: disks.NewClient(clients), sub: res.SubscriptionID}
}

func nodeLister(t *testing.T, nodes ...*v1.Node) corelisters.NodeLister {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, n := range nodes {
		if err := idx.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	return corelisters.NewNodeLister(idx)
}

func node(name, zone string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if zone != "" {
		n.Labels[v1.LabelTopologyZone] = zone
	}
	return n
}

func claim(name, size string) *v1.PersistentVolumeClaim {
	return &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: v1.PersistentVolumeClaimSpec{AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse(size)}}}}
}

func class(params map[string]string, wffc bool, zones ...string) *storagev1.StorageClass {
	return namedClass("sc", params, wffc, zones...)
}

func namedClass(name string, params map[string]string, wffc bool, zones ...string) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: DefaultName, Parameters: params}
	if wffc {
		m := storagev1.VolumeBindingWaitForFirstConsumer
		sc.VolumeBindingMode = &m
	}
	if len(zones) > 0 {
		sc.AllowedTopologies = []v1.TopologySelectorTerm{{MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{{Key: v1.LabelTopologyZone, Values: zones}}}}
	}
	return sc
}

// TestProvisionAgainstAzsim provisions every class variant against azsim and checks the disk's
// zone in ARM and the PV's labels, affinity and size; then deletion, refused while attached.
func TestProvisionAgainstAzsim(t *testing.T) {
	s := startSim(t)
	ctx := context.Background()
	rec := record.NewFakeRecorder(100)
	p := New(Options{Disks: s.disks, SubscriptionID: s.sub, Location: "eastus", ResourceGroup: "rg", Recorder: rec,
		Nodes: nodeLister(t, node("n1", "eastus-1"), node("n2", "eastus-2"), node("n3", "eastus-3"), node("fd", "0"))})

	cases := []struct {
		name, pv string
		sc       *storagev1.StorageClass
		selected string
		size     string
		wantZone string // "" = non-zonal
		wantGiB  int32
		wantSKU  string
	}{
		{name: "WFFC selected node", pv: "pv-wffc", sc: class(map[string]string{"kind": "Managed", "storageaccounttype": "Premium_LRS"}, true), selected: "n3", size: "1500Mi", wantZone: "3", wantGiB: 2, wantSKU: "Premium_LRS"},
		{name: "zone", pv: "pv-zone", sc: class(map[string]string{"zone": "eastus-2"}, false), size: "1Gi", wantZone: "2", wantGiB: 1, wantSKU: "StandardSSD_LRS"},
		{name: "allowedTopologies", pv: "pv-topo", sc: class(map[string]string{"skuName": "Standard_LRS"}, false, "eastus-1"), size: "10G", wantZone: "1", wantGiB: 10, wantSKU: "Standard_LRS"},
		{name: "non-zonal", pv: "pv-nz", sc: class(map[string]string{"zoned": "false"}, false), size: "1Gi", wantZone: "", wantGiB: 1, wantSKU: "StandardSSD_LRS"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pv, state, err := p.Provision(ctx, controller.ProvisionOptions{StorageClass: c.sc, PVName: c.pv, PVC: claim(c.pv, c.size), SelectedNodeName: c.selected})
			if err != nil || state != controller.ProvisioningFinished {
				t.Fatalf("%v %v", state, err)
			}
			d, err := s.disks.Get(ctx, disks.DiskID{SubscriptionID: s.sub, ResourceGroup: "rg", Name: c.pv})
			if err != nil || d == nil {
				t.Fatalf("disk in azsim: %v %v", d, err)
			}
			if got := strings.Join(disks.ZonesOf(d), ","); got != c.wantZone {
				t.Fatalf("azsim disk zones %q want %q", got, c.wantZone)
			}
			if *d.Properties.DiskSizeGB != c.wantGiB || string(*d.SKU.Name) != c.wantSKU {
				t.Fatalf("disk size %d sku %s", *d.Properties.DiskSizeGB, *d.SKU.Name)
			}
			if pv.Labels[v1.LabelTopologyRegion] != "eastus" {
				t.Fatalf("labels %v", pv.Labels)
			}
			if c.wantZone == "" {
				if _, ok := pv.Labels[v1.LabelTopologyZone]; ok || pv.Spec.NodeAffinity != nil {
					t.Fatalf("non-zonal PV has zone: %v %+v", pv.Labels, pv.Spec.NodeAffinity)
				}
			} else {
				z := "eastus-" + c.wantZone
				if pv.Labels[v1.LabelTopologyZone] != z || pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values[0] != z {
					t.Fatalf("PV zone %v %+v", pv.Labels, pv.Spec.NodeAffinity)
				}
			}
			q := pv.Spec.Capacity[v1.ResourceStorage]
			if q.Value() != int64(c.wantGiB)<<30 || !strings.EqualFold(pv.Spec.CSI.VolumeHandle, *d.ID) {
				t.Fatalf("capacity %s handle %s id %s", q.String(), pv.Spec.CSI.VolumeHandle, *d.ID)
			}
			// A second attempt (PV save failed) reuses the disk instead of creating another.
			again, _, err := p.Provision(ctx, controller.ProvisionOptions{StorageClass: c.sc, PVName: c.pv, PVC: claim(c.pv, c.size), SelectedNodeName: c.selected})
			if err != nil || again.Labels[v1.LabelTopologyZone] != pv.Labels[v1.LabelTopologyZone] {
				t.Fatalf("retry: %v %v", err, again.Labels)
			}
		})
	}

	// Round-robin over the active zones (fd has a fault domain label, not a zone).
	count := map[string]int{}
	for i := 0; i < 6; i++ {
		name := fmt.Sprintf("pv-rr-%d", i)
		pv, _, err := p.Provision(ctx, controller.ProvisionOptions{StorageClass: class(nil, false), PVName: name, PVC: claim(name, "1Gi")})
		if err != nil {
			t.Fatal(err)
		}
		count[pv.Labels[v1.LabelTopologyZone]]++
	}
	if fmt.Sprint(count) != "map[eastus-1:2 eastus-2:2 eastus-3:2]" {
		t.Fatalf("round-robin spread %v", count)
	}

	// Errors are events on the claim.
	for _, c := range []struct {
		sc       *storagev1.StorageClass
		selected string
		state    controller.ProvisioningState
		reason   string
	}{
		{sc: class(map[string]string{"zone": "eastus-1"}, true), selected: "n1", state: controller.ProvisioningFinished, reason: ReasonZoneChoice},
		{sc: class(map[string]string{"zones": "eastus-1"}, false, "eastus-1"), state: controller.ProvisioningFinished, reason: ReasonZoneChoice},
		{sc: class(nil, true), selected: "fd", state: controller.ProvisioningReschedule, reason: ReasonZoneChoice},
		{sc: class(map[string]string{"kind": "Shared"}, false), state: controller.ProvisioningFinished, reason: ReasonInvalidClass},
	} {
		for len(rec.Events) > 0 {
			<-rec.Events
		}
		_, state, err := p.Provision(ctx, controller.ProvisionOptions{StorageClass: c.sc, PVName: "pv-bad", PVC: claim("bad", "1Gi"), SelectedNodeName: c.selected})
		if err == nil || state != c.state {
			t.Fatalf("%+v: state %v err %v", c.sc.Parameters, state, err)
		}
		if ev := <-rec.Events; !strings.Contains(ev, c.reason) {
			t.Fatalf("event %q want reason %s", ev, c.reason)
		}
	}
	if d, _ := s.disks.Get(ctx, disks.DiskID{SubscriptionID: s.sub, ResourceGroup: "rg", Name: "pv-bad"}); d != nil {
		t.Fatal("a failed zone choice created a disk")
	}

	// Deletion is refused while the disk is attached, then succeeds.
	id := disks.DiskID{SubscriptionID: s.sub, ResourceGroup: "rg", Name: "pv-zone"}
	attach(t, s, id, true)
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-zone"}, Spec: v1.PersistentVolumeSpec{
		ClaimRef:               &v1.ObjectReference{Name: "pv-zone", Namespace: "default"},
		PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: disks.CSIDriver, VolumeHandle: id.String()}}}}
	if err := p.Delete(ctx, pv); err == nil || !strings.Contains(err.Error(), "attached") {
		t.Fatalf("delete of an attached disk: %v", err)
	}
	if d, _ := s.disks.Get(ctx, id); d == nil {
		t.Fatal("attached disk was deleted")
	}
	attach(t, s, id, false)
	if err := p.Delete(ctx, pv); err != nil {
		t.Fatal(err)
	}
	if d, err := s.disks.Get(ctx, id); d != nil || err != nil {
		t.Fatalf("disk still there: %v", err)
	}
	if err := p.Delete(ctx, pv); err != nil {
		t.Fatalf("deleting a missing disk: %v", err)
	}
	other := &v1.PersistentVolume{Spec: v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/"}}}}
	var ignored *controller.IgnoredError
	if !errors.As(p.Delete(ctx, other), &ignored) {
		t.Fatal("a non-disk PV is not ignored")
	}
}

// attach adds (or removes) the disk as data disk of vm1, as a CSI attach would.
func attach(t *testing.T, s *simEnv, id disks.DiskID, on bool) {
	t.Helper()
	ctx := context.Background()
	vms := s.clients.Compute.NewVirtualMachinesClient()
	vm, err := vms.Get(ctx, "rg", "vm1", nil)
	if err != nil {
		t.Fatal(err)
	}
	sp := vm.Properties.StorageProfile
	if sp == nil {
		sp = &armcompute.StorageProfile{}
		vm.Properties.StorageProfile = sp
	}
	sp.DataDisks = []*armcompute.DataDisk{}
	if on {
		sp.DataDisks = []*armcompute.DataDisk{{Lun: to.Ptr[int32](0), Name: to.Ptr(id.Name), CreateOption: to.Ptr(armcompute.DiskCreateOptionTypesAttach),
			ManagedDisk: &armcompute.ManagedDiskParameters{ID: to.Ptr(id.String())}}}
	}
	p, err := vms.BeginCreateOrUpdate(ctx, "rg", "vm1", vm.VirtualMachine, nil)
	if err == nil {
		_, err = p.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: 50 * time.Millisecond})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// failFirstCreate fails the first Create of every disk (before ARM sees it), so that every claim
// is provisioned twice, as the library retries after a failed create.
type failFirstCreate struct {
	Disks
	mu   sync.Mutex
	seen map[string]bool
}

func (f *failFirstCreate) Create(ctx context.Context, s disks.Spec) (*armcompute.Disk, error) {
	f.mu.Lock()
	first := !f.seen[s.ID.Name]
	f.seen[s.ID.Name] = true
	f.mu.Unlock()
	if first {
		return nil, fmt.Errorf("injected failure creating %s", s.ID.Name)
	}
	return f.Disks.Create(ctx, s)
}

// TestConcurrentClassesSpread provisions claims of several multi-zone classes at once, each
// claim failing its first create and retried (as the library does), and checks that every class
// spreads its own claims evenly, that StatefulSet replicas go to consecutive zones and that the
// claims of one replica share its zone.
func TestConcurrentClassesSpread(t *testing.T) {
	s := startSim(t)
	ctx := context.Background()
	p := New(Options{Disks: &failFirstCreate{Disks: s.disks, seen: map[string]bool{}}, SubscriptionID: s.sub, Location: "eastus", ResourceGroup: "rg",
		Nodes: nodeLister(t, node("n1", "eastus-1"), node("n2", "eastus-2"), node("n3", "eastus-3"))})
	classes := map[string]*storagev1.StorageClass{
		"zones13": namedClass("zones13", map[string]string{"zones": "eastus-1,eastus-3"}, false),
		"topo12":  namedClass("topo12", nil, false, "eastus-1", "eastus-2"),
		"rr":      namedClass("rr", nil, false),
		"zone2":   namedClass("zone2", map[string]string{"zone": "eastus-2"}, false),
	}
	type job struct{ class, claim string }
	var jobs []job
	for cls := range classes {
		for _, n := range []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot"} {
			jobs = append(jobs, job{cls, cls + "-" + n})
		}
	}
	for ord := 0; ord < 4; ord++ {
		jobs = append(jobs, job{"zones13", fmt.Sprintf("data-web-%d", ord)}, job{"zones13", fmt.Sprintf("logs-web-%d", ord)},
			job{"rr", fmt.Sprintf("data-db-%d", ord)})
	}

	var mu sync.Mutex
	zoneOf := map[string]string{}
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			opts := controller.ProvisionOptions{StorageClass: classes[j.class], PVName: "pv-" + j.claim, PVC: claim(j.claim, "1Gi")}
			var pv *v1.PersistentVolume
			var err error
			for attempt := 0; attempt < 2; attempt++ {
				if pv, _, err = p.Provision(ctx, opts); err == nil {
					break
				}
			}
			if err != nil {
				t.Errorf("%s: %v", j.claim, err)
				return
			}
			mu.Lock()
			zoneOf[j.claim] = pv.Labels[v1.LabelTopologyZone]
			mu.Unlock()
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	want := map[string]string{
		"zones13": "map[eastus-1:3 eastus-3:3]",
		"topo12":  "map[eastus-1:3 eastus-2:3]",
		"rr":      "map[eastus-1:2 eastus-2:2 eastus-3:2]",
		"zone2":   "map[eastus-2:6]",
	}
	for cls, w := range want {
		count := map[string]int{}
		for c, z := range zoneOf {
			if strings.HasPrefix(c, cls+"-") {
				count[z]++
			}
		}
		if got := fmt.Sprint(count); got != w {
			t.Errorf("class %s: claims per zone %s, want %s", cls, got, w)
		}
	}
	for ord := 0; ord < 4; ord++ {
		data, logs := zoneOf[fmt.Sprintf("data-web-%d", ord)], zoneOf[fmt.Sprintf("logs-web-%d", ord)]
		if data != logs {
			t.Errorf("replica %d of web: data in %s, logs in %s", ord, data, logs)
		}
		if ord > 0 && data == zoneOf[fmt.Sprintf("data-web-%d", ord-1)] {
			t.Errorf("replicas %d and %d of web both in %s", ord-1, ord, data)
		}
		if ord > 0 && zoneOf[fmt.Sprintf("data-db-%d", ord)] == zoneOf[fmt.Sprintf("data-db-%d", ord-1)] {
			t.Errorf("replicas %d and %d of db both in %s", ord-1, ord, data)
		}
	}
	// The disks in ARM are where the PVs say.
	for c, z := range zoneOf {
		d, err := s.disks.Get(ctx, disks.DiskID{SubscriptionID: s.sub, ResourceGroup: "rg", Name: "pv-" + c})
		if err != nil || d == nil || "eastus-"+strings.Join(disks.ZonesOf(d), ",") != z {
			t.Errorf("disk of %s: %v %v, PV zone %s", c, d, err, z)
		}
	}
	if len(p.claimTurns) != 0 {
		t.Errorf("turns of provisioned claims are still remembered: %v", p.claimTurns)
	}
}
