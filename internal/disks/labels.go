package disks

import (
	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/arm"
)

// Labels are the labels of a disk's PV: the region, and for a zonal disk the zone
// "<region>-<n>" (the same form as the nodes' zone label). armZones are the disk's ARM zones.
func Labels(location string, armZones []string) map[string]string {
	region := arm.NormalizeLocation(location)
	l := map[string]string{v1.LabelTopologyRegion: region}
	if len(armZones) > 0 && armZones[0] != "" {
		l[v1.LabelTopologyZone] = region + "-" + armZones[0]
	}
	return l
}

// NodeAffinity keeps pods of a zonal disk's PV on nodes of that zone; nil for a non-zonal disk
// (which cannot be pinned: non-zoned nodes carry fault domain numbers, not a common label).
func NodeAffinity(labels map[string]string) *v1.VolumeNodeAffinity {
	zone, ok := labels[v1.LabelTopologyZone]
	if !ok {
		return nil
	}
	return &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
		MatchExpressions: []v1.NodeSelectorRequirement{{Key: v1.LabelTopologyZone, Operator: v1.NodeSelectorOpIn, Values: []string{zone}}},
	}}}}
}

// NeedsLabels reports whether the PV lacks any of the labels (or has other values).
func NeedsLabels(pv *v1.PersistentVolume, want map[string]string) bool {
	for k, v := range want {
		if pv.Labels[k] != v {
			return true
		}
	}
	return false
}
