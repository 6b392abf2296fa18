package nodes

import (
	"fmt"
	"strconv"
	"strings"
)

// Zone computes the topology labels of a VM:
//   - zonal VM: zone = "<region>-<zone>" (e.g. eastus2-1), lower case;
//   - non-zonal VM: zone = its fault domain number ("0", "1", ...), so zonal and non-zonal
//     nodes never share a zone value;
//   - region = the VM location, lower case without spaces.
//
// A zone that is not a number is an error (as in the existing provider). When a non-zonal VM's
// fault domain is unknown (no instance view), zone is "" and only the region is set.
func Zone(location string, zones []string, faultDomain *int32) (zone, region string, err error) {
	region = strings.ToLower(strings.ReplaceAll(location, " ", ""))
	if len(zones) > 0 && zones[0] != "" {
		if _, err := strconv.Atoi(zones[0]); err != nil {
			return "", region, fmt.Errorf("zone %q is not a number", zones[0])
		}
		return fmt.Sprintf("%s-%s", region, zones[0]), region, nil
	}
	if faultDomain != nil {
		return strconv.Itoa(int(*faultDomain)), region, nil
	}
	return "", region, nil
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
