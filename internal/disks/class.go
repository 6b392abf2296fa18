package disks

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/azure-ccm/azure-ccm/internal/disks/zonechoice"
)

// StorageClass parameter names (matched case-insensitively, as the in-tree plugin did).
const (
	ParamKind               = "kind"
	ParamStorageAccountType = "storageaccounttype"
	ParamSKUName            = "skuname"
	ParamZoned              = "zoned"
	ParamZone               = "zone"
	ParamZones              = "zones"
	ParamResourceGroup      = "resourcegroup"
	ParamFSType             = "fstype"
	ParamCachingMode        = "cachingmode"
)

// Zone label keys that allowedTopologies may use for the zone.
var zoneKeys = map[string]bool{v1.LabelTopologyZone: true, v1.LabelFailureDomainBetaZone: true}
var regionKeys = map[string]bool{v1.LabelTopologyRegion: true, v1.LabelFailureDomainBetaRegion: true}

// Class is a parsed StorageClass.
type Class struct {
	SKU           string
	ResourceGroup string // "" = azure.json resourceGroup
	FSType        string
	CachingMode   string
	// Zone-related input for zonechoice (Region, NodeZones, SelectedNode... are filled by the caller).
	Zoned                bool
	WaitForFirstConsumer bool
	ClassZones           []string
	HasZone, HasZones    bool
	AllowedTopologyZones []string
}

// skus are the managed disk SKUs ARM accepts, by lower-case name.
var skus = map[string]string{
	"standard_lrs": "Standard_LRS", "premium_lrs": "Premium_LRS", "standardssd_lrs": "StandardSSD_LRS", "ultrassd_lrs": "UltraSSD_LRS",
	"premium_zrs": "Premium_ZRS", "standardssd_zrs": "StandardSSD_ZRS", "premiumv2_lrs": "PremiumV2_LRS",
}

// ParseClass reads the StorageClass parameters. Unknown parameters are errors, so that a typo
// (e.g. "zoneds") does not silently give a different disk.
func ParseClass(sc *storagev1.StorageClass) (Class, error) {
	c := Class{SKU: "StandardSSD_LRS", Zoned: true}
	if sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer {
		c.WaitForFirstConsumer = true
	}
	keys := make([]string, 0, len(sc.Parameters))
	for k := range sc.Parameters {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	sawSKU := ""
	for _, k := range keys {
		v := strings.TrimSpace(sc.Parameters[k])
		switch strings.ToLower(k) {
		case ParamKind:
			if !strings.EqualFold(v, "managed") {
				return c, fmt.Errorf("parameter kind=%q: only kind Managed is supported (blob disks, kinds shared and dedicated, have no availability zones)", v)
			}
		case ParamStorageAccountType, ParamSKUName:
			if sawSKU != "" {
				return c, fmt.Errorf("parameters %s and %s both set the disk SKU; use one", sawSKU, k)
			}
			sawSKU = k
			sku, ok := skus[strings.ToLower(v)]
			if !ok {
				return c, fmt.Errorf("parameter %s=%q is not a managed disk SKU", k, v)
			}
			c.SKU = sku
		case ParamZoned:
			b, err := strconv.ParseBool(v)
			if err != nil {
				return c, fmt.Errorf("parameter zoned=%q is not a boolean", v)
			}
			c.Zoned = b
		case ParamZone:
			c.HasZone, c.ClassZones = true, append(c.ClassZones, v)
		case ParamZones:
			c.HasZones = true
			c.ClassZones = append(c.ClassZones, strings.Split(v, ",")...)
		case ParamResourceGroup:
			// It becomes a segment of the disk's ARM ID and URL.
			if !validResourceGroup(v) {
				return c, fmt.Errorf("parameter resourceGroup=%q is not a resource group name (1-90 letters, digits, '-', '_', '.', '(', ')', not ending in '.')", truncate(v, 100))
			}
			c.ResourceGroup = v
		case ParamFSType:
			c.FSType = v
		case ParamCachingMode:
			switch strings.ToLower(v) {
			case "none", "readonly", "readwrite":
				c.CachingMode = v
			default:
				return c, fmt.Errorf("parameter cachingmode=%q: want None, ReadOnly or ReadWrite", v)
			}
		default:
			return c, fmt.Errorf("unknown StorageClass parameter %q", k)
		}
	}
	for _, term := range sc.AllowedTopologies {
		for _, e := range term.MatchLabelExpressions {
			switch {
			case zoneKeys[e.Key]:
				c.AllowedTopologyZones = append(c.AllowedTopologyZones, e.Values...)
			case regionKeys[e.Key]:
				// The region is the cluster's; nothing to choose.
			default:
				return c, fmt.Errorf("allowedTopologies key %q is not supported (use %s)", e.Key, v1.LabelTopologyZone)
			}
		}
	}
	return c, nil
}

// ZoneInput is the zonechoice input for this class; the caller adds region, nodes and counter.
func (c Class) ZoneInput() zonechoice.Input {
	return zonechoice.Input{Zoned: c.Zoned, WaitForFirstConsumer: c.WaitForFirstConsumer,
		ClassZones: c.ClassZones, HasZone: c.HasZone, HasZones: c.HasZones,
		AllowedTopologyZones: c.AllowedTopologyZones}
}

// SizeGiB rounds a requested size up to whole GiB (at least 1), the unit of ARM's diskSizeGB.
func SizeGiB(bytes int64) int32 {
	const gib = int64(1) << 30
	n := (bytes + gib - 1) / gib
	if n < 1 {
		n = 1
	}
	return int32(n)
}

// validResourceGroup applies ARM's rules for resource group names.
func validResourceGroup(name string) bool {
	if name == "" || len(name) > 90 || strings.HasSuffix(name, ".") {
		return false
	}
	for _, r := range name {
		if !(unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("-_.()", r)) {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
