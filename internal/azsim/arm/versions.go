package arm

// API versions ARM serves, per resource type, as published in the Azure REST API
// specifications: the version directories of specification/network/resource-manager/
// Microsoft.Network/{stable,preview} that hold the type's swagger (network.json up to
// 2016-06-01, one file per type since), and for Microsoft.Compute the ComputeRP (compute.json
// up to 2021-11-01) and DiskRP (disk.json) versions of specification/compute/resource-manager.
// A client pinned to any of them (an older SDK, a CLI, a template) must get answers, not
// NoRegisteredProviderFound. The response bodies are those of the newest version: older
// clients ignore fields they do not know.

// nrpVersions are the Microsoft.Network API versions, oldest first.
var nrpVersions = []string{
	"2015-05-01-preview", "2015-06-15", "2016-03-30", "2016-06-01", "2016-09-01", "2016-12-01",
	"2017-03-01", "2017-06-01", "2017-08-01", "2017-09-01", "2017-10-01", "2017-11-01",
	"2018-01-01", "2018-02-01", "2018-04-01", "2018-06-01", "2018-07-01", "2018-08-01", "2018-10-01", "2018-11-01", "2018-12-01",
	"2019-02-01", "2019-04-01", "2019-06-01", "2019-07-01", "2019-08-01", "2019-09-01", "2019-11-01", "2019-12-01",
	"2020-03-01", "2020-04-01", "2020-05-01", "2020-06-01", "2020-07-01", "2020-08-01", "2020-11-01",
	"2021-02-01", "2021-03-01", "2021-05-01", "2021-08-01",
	"2022-01-01", "2022-05-01", "2022-07-01", "2022-09-01", "2022-11-01",
	"2023-02-01", "2023-04-01", "2023-05-01", "2023-06-01", "2023-09-01", "2023-11-01",
	"2024-01-01", "2024-03-01", "2024-05-01", "2024-07-01", "2024-10-01",
	"2025-01-01", "2025-03-01", "2025-05-01", "2025-07-01",
}

// networkSince is every Microsoft.Network version from first on (the type's first version).
func networkSince(first string) []string {
	for i, v := range nrpVersions {
		if v == first {
			return append([]string(nil), nrpVersions[i:]...)
		}
	}
	panic("azsim: unknown Microsoft.Network API version " + first)
}

var (
	// NetworkAPIVersions: virtual networks, network security groups, route tables, public IP
	// addresses, load balancers and network interfaces (and their children) — every version.
	NetworkAPIVersions = networkSince("2015-05-01-preview")
	// PublicIPPrefixAPIVersions: publicIPPrefixes appeared in 2018-07-01.
	PublicIPPrefixAPIVersions = networkSince("2018-07-01")
	// NATGatewayAPIVersions: natGateways appeared in 2019-02-01.
	NATGatewayAPIVersions = networkSince("2019-02-01")
	// ServiceGatewayAPIVersions: serviceGateways appeared in 2025-05-01.
	ServiceGatewayAPIVersions = networkSince("2025-05-01")
	// VMSSNetworkInterfaceAPIVersions: the scale set NIC views under microsoft.Compute that the
	// Network API serves (vmssNetworkInterface.json pins 2017-03-30, and 2018-10-01 since).
	VMSSNetworkInterfaceAPIVersions = []string{"2017-03-30", "2018-10-01"}

	// ComputeAPIVersions: virtual machines, scale sets, scale set instances and availability
	// sets (ComputeRP).
	ComputeAPIVersions = []string{
		"2015-06-15", "2016-03-30", "2016-04-30-preview", "2017-03-30", "2017-12-01",
		"2018-04-01", "2018-06-01", "2018-10-01", "2019-03-01", "2019-07-01", "2019-12-01",
		"2020-06-01", "2020-12-01", "2021-03-01", "2021-04-01", "2021-07-01", "2021-11-01",
		"2022-03-01", "2022-08-01", "2022-11-01", "2023-03-01", "2023-07-01", "2023-09-01",
		"2024-03-01", "2024-07-01", "2024-11-01", "2025-04-01", "2025-11-01", "2026-04-01",
	}
	// DiskAPIVersions: managed disks (DiskRP).
	DiskAPIVersions = []string{
		"2016-04-30-preview", "2017-03-30", "2018-04-01", "2018-06-01", "2018-09-30",
		"2019-03-01", "2019-07-01", "2019-11-01", "2020-05-01", "2020-06-30", "2020-09-30", "2020-12-01",
		"2021-04-01", "2021-08-01", "2021-12-01", "2022-03-02", "2022-07-02",
		"2023-01-02", "2023-04-02", "2023-10-02", "2024-03-02", "2025-01-02",
	}
	// ResourcesAPIVersions: armresources v1 (recordings) … v3.
	ResourcesAPIVersions = []string{"2021-04-01", "2022-09-01", "2024-03-01", "2024-07-01", "2024-11-01", "2025-03-01", "2025-04-01"}
)
