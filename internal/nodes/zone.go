package nodes

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Zone computes the topology labels of a VM:
//   - zonal VM: zone = "<region>-<zone>" (e.g. eastus2-1), lower case;
//   - non-zonal VM: zone = its fault domain number ("0", "1", ...), so zonal and non-zonal
//     nodes never share a zone value;
//   - region = the VM location, lower case without spaces.
//
// A zone that is not a number is an error (as in the existing provider). When a non-zonal VM's
// fault domain is unknown (no instance view), zone is "" and only the region is set. Values that
// would not be accepted as label values (a signed zone or fault domain, a zone without a location,
// a location with other characters) are errors too: the node update carrying them would be
// refused as a whole.
func Zone(location string, zones []string, faultDomain *int32) (zone, region string, err error) {
	region = strings.ToLower(strings.ReplaceAll(location, " ", ""))
	if errs := validation.IsValidLabelValue(region); len(errs) > 0 {
		return "", "", fmt.Errorf("location %q is not a label value: %s", location, strings.Join(errs, "; "))
	}
	if len(zones) > 0 && zones[0] != "" {
		if !isDigits(zones[0]) {
			return "", region, fmt.Errorf("zone %q is not a number", zones[0])
		}
		if region == "" {
			return "", region, fmt.Errorf("zone %q without a location", zones[0])
		}
		zone = fmt.Sprintf("%s-%s", region, zones[0])
		if errs := validation.IsValidLabelValue(zone); len(errs) > 0 {
			return "", region, fmt.Errorf("zone %q is not a label value: %s", zone, strings.Join(errs, "; "))
		}
		return zone, region, nil
	}
	if faultDomain != nil {
		if *faultDomain < 0 {
			return "", region, fmt.Errorf("fault domain %d is negative", *faultDomain)
		}
		return strconv.Itoa(int(*faultDomain)), region, nil
	}
	return "", region, nil
}

// isDigits reports whether s is a non-empty run of ASCII digits (no sign, unlike strconv.Atoi).
func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// ZoneID returns the zone number of a "<region>-<n>" label value, or "" if the value is a
// fault domain or another region's zone.
func ZoneID(label, region string) string {
	prefix := strings.ToLower(region) + "-"
	if !strings.HasPrefix(strings.ToLower(label), prefix) {
		return ""
	}
	return label[len(prefix):]
}
