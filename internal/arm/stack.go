package arm

import (
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// Azure Stack Hub serves older ARM API versions than public Azure. In Azure Stack mode
// (config.Config.IsStackCloud) every request to one of these resource types is sent with the
// version the existing provider pins for it there; the key is namespace/top-level type in
// lower case.
var stackAPIVersions = map[string]string{
	"microsoft.network/loadbalancers":           "2018-11-01",
	"microsoft.network/publicipaddresses":       "2018-11-01",
	"microsoft.network/networkinterfaces":       "2018-11-01",
	"microsoft.network/networksecuritygroups":   "2018-11-01",
	"microsoft.network/routetables":             "2018-11-01",
	"microsoft.network/virtualnetworks":         "2018-11-01",
	"microsoft.network/privatelinkservices":     "2019-03-01",
	"microsoft.compute/virtualmachines":         "2017-12-01",
	"microsoft.compute/virtualmachinescalesets": "2019-07-01",
	"microsoft.compute/availabilitysets":        "2019-07-01",
	"microsoft.compute/disks":                   "2019-03-01",
	"microsoft.compute/snapshots":               "2019-03-01",
}

// StackAPIVersion is the api-version a request to path is sent with on Azure Stack (false: the
// client's own). The Network views of scale set instances' interfaces and public IPs
// (…/virtualMachineScaleSets/…/networkInterfaces) keep theirs: those are already old versions
// of their own. Other types (NAT gateways, operation status URLs, the providers list) are not
// pinned.
func StackAPIVersion(path string) (string, bool) {
	i := strings.LastIndex(strings.ToLower(path), "/providers/")
	if i < 0 {
		return "", false
	}
	seg := strings.Split(strings.Trim(path[i+len("/providers/"):], "/"), "/")
	if len(seg) < 2 {
		return "", false
	}
	// seg: namespace, type, name, child type, name, …
	for j := 3; j < len(seg); j += 2 {
		switch strings.ToLower(seg[j]) {
		case "networkinterfaces", "publicipaddresses", "ipconfigurations":
			if !strings.EqualFold(seg[1], "networkInterfaces") {
				return "", false
			}
		}
	}
	v, ok := stackAPIVersions[strings.ToLower(seg[0]+"/"+seg[1])]
	return v, ok
}

// stackPolicy rewrites the api-version of requests StackAPIVersion pins.
type stackPolicy struct{}

func (stackPolicy) Do(req *policy.Request) (*http.Response, error) {
	u := req.Raw().URL
	if v, ok := StackAPIVersion(u.Path); ok {
		q := u.Query()
		if q.Has("api-version") {
			q.Set("api-version", v)
			u.RawQuery = q.Encode()
		}
	}
	return req.Next()
}
