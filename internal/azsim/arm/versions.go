package arm

// API versions accepted per resource provider (arm-protocol.md 2.1).
var (
	// NetworkAPIVersions: armnetwork v6, v7, v8, v9.
	NetworkAPIVersions = []string{"2024-05-01", "2024-07-01", "2025-03-01", "2025-05-01"}
	// ComputeAPIVersions: armcompute v6, v7, v8.
	ComputeAPIVersions = []string{"2024-11-01", "2025-04-01", "2026-04-01"}
	// DiskAPIVersions: armcompute v6, v7 disks.
	DiskAPIVersions = []string{"2024-03-02", "2025-01-02"}
	// VMSSNetworkInterfaceAPIVersions: armnetwork's VMSS NIC views under microsoft.Compute.
	VMSSNetworkInterfaceAPIVersions = []string{"2018-10-01"}
	// ResourcesAPIVersions: armresources v1 (recordings) … v3.
	ResourcesAPIVersions = []string{"2021-04-01", "2022-09-01", "2024-03-01", "2024-07-01", "2024-11-01", "2025-03-01", "2025-04-01"}
)
