package disks

import (
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

func TestParseClass(t *testing.T) {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	cases := []struct {
		name    string
		params  map[string]string
		topo    []v1.TopologySelectorTerm
		mode    *storagev1.VolumeBindingMode
		want    Class
		wantErr string
	}{
		{name: "defaults", want: Class{SKU: "StandardSSD_LRS", Zoned: true}},
		{name: "seed example", params: map[string]string{"kind": "Managed", "storageaccounttype": "Premium_LRS", "zone": "centralus-1"},
			want: Class{SKU: "Premium_LRS", Zoned: true, HasZone: true, ClassZones: []string{"centralus-1"}}},
		{name: "skuName and zones, keys case-insensitive", params: map[string]string{"skuName": "premium_lrs", "Zones": "eastus-1, eastus-2", "resourceGroup": "rg-disks", "fsType": "xfs", "cachingMode": "ReadOnly"},
			want: Class{SKU: "Premium_LRS", Zoned: true, HasZones: true, ClassZones: []string{"eastus-1", " eastus-2"}, ResourceGroup: "rg-disks", FSType: "xfs", CachingMode: "ReadOnly"}},
		{name: "zoned false", params: map[string]string{"zoned": "false"}, want: Class{SKU: "StandardSSD_LRS"}},
		{name: "WaitForFirstConsumer", mode: &wffc, want: Class{SKU: "StandardSSD_LRS", Zoned: true, WaitForFirstConsumer: true}},
		{name: "allowedTopologies", topo: []v1.TopologySelectorTerm{
			{MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{{Key: v1.LabelTopologyZone, Values: []string{"eastus-1", "eastus-2"}}, {Key: v1.LabelTopologyRegion, Values: []string{"eastus"}}}},
			{MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{{Key: v1.LabelFailureDomainBetaZone, Values: []string{"eastus-3"}}}},
		}, want: Class{SKU: "StandardSSD_LRS", Zoned: true, AllowedTopologyZones: []string{"eastus-1", "eastus-2", "eastus-3"}}},
		{name: "unmanaged kind", params: map[string]string{"kind": "Shared"}, wantErr: "only kind Managed"},
		{name: "dedicated kind", params: map[string]string{"kind": "dedicated"}, wantErr: "blob disks"},
		{name: "bad sku", params: map[string]string{"storageaccounttype": "Fast"}, wantErr: "not a managed disk SKU"},
		{name: "two sku keys", params: map[string]string{"storageaccounttype": "Premium_LRS", "skuname": "Premium_LRS"}, wantErr: "both set"},
		{name: "bad zoned", params: map[string]string{"zoned": "maybe"}, wantErr: "not a boolean"},
		{name: "bad caching", params: map[string]string{"cachingmode": "fast"}, wantErr: "cachingmode"},
		{name: "unknown parameter", params: map[string]string{"zoneds": "true"}, wantErr: `unknown StorageClass parameter "zoneds"`},
		{name: "unknown topology key", topo: []v1.TopologySelectorTerm{{MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{{Key: "rack", Values: []string{"a"}}}}}, wantErr: `"rack"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseClass(&storagev1.StorageClass{Parameters: c.params, AllowedTopologies: c.topo, VolumeBindingMode: c.mode})
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func TestSizeGiB(t *testing.T) {
	for in, want := range map[int64]int32{0: 1, 1: 1, 1 << 30: 1, 1<<30 + 1: 2, 5 * 1000 * 1000 * 1000: 5, 10 << 30: 10} {
		if got := SizeGiB(in); got != want {
			t.Errorf("SizeGiB(%d) = %d want %d", in, got, want)
		}
	}
}

func TestDiskOf(t *testing.T) {
	const id = "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/disks/d1"
	managed, shared := v1.AzureManagedDisk, v1.AzureSharedBlobDisk
	cases := []struct {
		name   string
		spec   v1.PersistentVolumeSpec
		kind   VolumeKind
		disk   string
		reason string
	}{
		{name: "in-tree managed", spec: v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{AzureDisk: &v1.AzureDiskVolumeSource{DiskName: "d1", DataDiskURI: id, Kind: &managed}}}, kind: ManagedDisk, disk: "d1"},
		{name: "in-tree managed without kind", spec: v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{AzureDisk: &v1.AzureDiskVolumeSource{DiskName: "d1", DataDiskURI: strings.ToLower(id)}}}, kind: ManagedDisk, disk: "d1"},
		{name: "in-tree blob", spec: v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{AzureDisk: &v1.AzureDiskVolumeSource{DiskName: "b", DataDiskURI: "https://acct.blob.core.windows.net/vhds/b.vhd", Kind: &shared}}}, kind: UnmanagedDisk, reason: "blob disk"},
		{name: "in-tree blob without kind", spec: v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{AzureDisk: &v1.AzureDiskVolumeSource{DiskName: "b", DataDiskURI: "https://acct.blob.core.windows.net/vhds/b.vhd"}}}, kind: UnmanagedDisk, reason: "blob disk"},
		{name: "csi", spec: v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: CSIDriver, VolumeHandle: id}}}, kind: ManagedDisk, disk: "d1"},
		{name: "csi bad handle", spec: v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: CSIDriver, VolumeHandle: "d1"}}}, kind: UnmanagedDisk, reason: "not a managed disk resource ID"},
		{name: "other csi", spec: v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "file.csi.azure.com", VolumeHandle: id}}}, kind: NotAzureDisk},
		{name: "hostPath", spec: v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/x"}}}, kind: NotAzureDisk},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			kind, disk, reason := DiskOf(&v1.PersistentVolume{Spec: c.spec})
			if kind != c.kind || disk.Name != c.disk || !strings.Contains(reason, c.reason) || (c.reason == "") != (reason == "") {
				t.Fatalf("got %v %+v %q", kind, disk, reason)
			}
			if kind == ManagedDisk && !strings.EqualFold(disk.String(), id) {
				t.Fatalf("ID round trip: %s", disk)
			}
		})
	}
}

func TestLabelsAndAffinity(t *testing.T) {
	l := Labels("East US", []string{"2"})
	if !reflect.DeepEqual(l, map[string]string{v1.LabelTopologyRegion: "eastus", v1.LabelTopologyZone: "eastus-2"}) {
		t.Fatalf("zonal labels %v", l)
	}
	a := NodeAffinity(l)
	if a == nil || a.Required.NodeSelectorTerms[0].MatchExpressions[0].Values[0] != "eastus-2" {
		t.Fatalf("affinity %+v", a)
	}
	l = Labels("eastus", nil)
	if !reflect.DeepEqual(l, map[string]string{v1.LabelTopologyRegion: "eastus"}) || NodeAffinity(l) != nil {
		t.Fatalf("non-zonal %v", l)
	}
	pv := &v1.PersistentVolume{}
	pv.Labels = map[string]string{v1.LabelTopologyRegion: "eastus"}
	if NeedsLabels(pv, l) || !NeedsLabels(pv, Labels("eastus", []string{"1"})) {
		t.Fatal("NeedsLabels")
	}
}
