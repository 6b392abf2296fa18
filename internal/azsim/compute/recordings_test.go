package compute

import (
	"maps"
	"net/http"
	"testing"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/network"
	"github.com/azure-ccm/azure-ccm/internal/azsim/recordings"
)

// TestRecordedComputeTraffic replays recorded CRP exchanges against the engine with the
// compute types and requires the recorded status codes, error codes, ETag values, polling URL
// shapes and body keys; the body differences azsim keeps on purpose are bodyDifferences, each
// of which must still occur and be documented in docs/azsim.md.
func TestRecordedComputeTraffic(t *testing.T) {
	dir := recordings.Dir(t)
	cassettes := []string{"availabilityset", "disk", "virtualmachine", "virtualmachinescaleset", "virtualmachinescalesetvm"}
	found, replayed := map[string]bool{}, 0
	for _, name := range cassettes {
		t.Run(name, func(t *testing.T) {
			c := recordings.Load(t, dir, name)
			e := arm.NewEngine(arm.Config{BaseURL: func() string { return recordings.ARMHost }})
			network.Register(e)
			// The recordings were made in eastus2, which has zones in Azure.
			Register(e, Config{Locations: []Location{{Name: "eastus2", DisplayName: "East US 2", Zones: []string{"1", "2", "3"}}}})
			maps.Copy(found, recordings.Replay(t, name, c, e, recordings.Options{Deviations: deviations, BodyDifferences: bodyDifferences}))
			replayed++
		})
	}
	if replayed == len(cassettes) { // not when -run picked some
		recordings.CheckBodyDifferences(t, bodyDifferences, found)
	}
	recordings.CheckDocumented(t, bodyDifferences)
}

// deviations are recorded answers azsim knowingly does not reproduce.
var deviations = map[string]recordings.Deviation{
	"virtualmachine#19": {Status: http.StatusOK, Why: "NIC DELETE: NRP answered 202 here and 200 in interface.yaml; the network handlers answer 200"},
}

// bodyDifferences are the differences between azsim's answer bodies and CRP's that azsim keeps
// on purpose (recordings.BodyDifferenceKey → why).
var bodyDifferences = map[string]string{
	"Microsoft.Resources/resourceGroups missing .tags":                 whyPolicyTags,
	"Microsoft.Network/networkInterfaces extra .properties.macAddress": "azsim gives a network interface its MAC address when it is created; NRP gives it one when a VM using it starts",

	"Microsoft.Compute/availabilitySets extra .properties.provisioningState":                     "the engine keeps every resource's operation state in provisioningState; CRP's availability sets have none",
	"Microsoft.Compute/availabilitySets extra .properties.virtualMachines":                       "CRP's PUT answer leaves out the empty member list its reads show; azsim shows it in both",
	"Microsoft.Compute/availabilitySets missing .properties.virtualMachineScaleSetMigrationInfo": "a hint for migrating the availability set to a scale set; azsim does not model that migration",

	"Microsoft.Compute/disks extra .properties.diskIOPSReadWrite":    whyDiskPut,
	"Microsoft.Compute/disks extra .properties.diskMBpsReadWrite":    whyDiskPut,
	"Microsoft.Compute/disks extra .properties.diskSizeBytes":        whyDiskPut,
	"Microsoft.Compute/disks extra .properties.diskState":            whyDiskPut,
	"Microsoft.Compute/disks extra .properties.encryption":           whyDiskPut,
	"Microsoft.Compute/disks extra .properties.networkAccessPolicy":  whyDiskPut,
	"Microsoft.Compute/disks extra .properties.publicNetworkAccess":  whyDiskPut,
	"Microsoft.Compute/disks extra .properties.timeCreated":          whyDiskPut,
	"Microsoft.Compute/disks extra .properties.uniqueId":             whyDiskPut,
	"Microsoft.Compute/disks extra .sku":                             whyDiskPut,
	"Microsoft.Compute/locations/DiskOperations missing .properties": "CRP's status of a finished disk operation carries the disk (properties.output); azsim's has the status, times and error, and clients read the disk itself",

	"Microsoft.Compute/virtualMachines extra .properties.instanceView":                                 whyInstanceViewInPut,
	"Microsoft.Compute/virtualMachines missing .properties.storageProfile.imageReference.exactVersion": whyNoImages,
	"Microsoft.Compute/virtualMachines missing .properties.storageProfile.osDisk.managedDisk.id":       whyNoOSDisks,

	"Microsoft.Compute/virtualMachineScaleSets/virtualMachines extra .properties.instanceView":                                   whyInstanceViewInPut,
	"Microsoft.Compute/virtualMachineScaleSets/virtualMachines extra .properties.networkProfile.networkInterfaces[0].properties": "azsim marks every NIC reference of an instance primary or not (the CCM picks a multi-NIC instance's primary NIC by it); CRP left it out for the recorded single-NIC instance",
	"Microsoft.Compute/virtualMachineScaleSets/virtualMachines extra .tags":                                                      "CRP dropped the tags of the recorded instance PUT; azsim keeps an instance's tags",
	"Microsoft.Compute/virtualMachineScaleSets/virtualMachines missing .properties.storageProfile.imageReference.exactVersion":   whyNoImages,
	"Microsoft.Compute/virtualMachineScaleSets/virtualMachines missing .properties.storageProfile.osDisk.managedDisk.id":         whyNoOSDisks,
	"Microsoft.Compute/virtualMachineScaleSets/virtualMachines/instanceView missing .disks":                                      whyInstanceViewFacts,
	"Microsoft.Compute/virtualMachineScaleSets/virtualMachines/instanceView missing .hyperVGeneration":                           whyInstanceViewFacts,
	"Microsoft.Compute/virtualMachineScaleSets/virtualMachines/instanceView missing .osName":                                     whyInstanceViewFacts,
	"Microsoft.Compute/virtualMachineScaleSets/virtualMachines/instanceView missing .osVersion":                                  whyInstanceViewFacts,
	"Microsoft.Compute/virtualMachineScaleSets/virtualMachines/instanceView missing .placementGroupId":                           whyInstanceViewFacts,
	"Microsoft.Compute/virtualMachineScaleSets/virtualMachines/instanceView missing .statuses[0].time":                           whyInstanceViewFacts,
	"Microsoft.Compute/virtualMachineScaleSets/virtualMachines/instanceView missing .vmAgent":                                    whyInstanceViewFacts,
}

// Reasons shared by several body differences.
const (
	whyPolicyTags        = "a policy of the recording's subscription tagged new resource groups (createdAt); ARM adds no tags"
	whyDiskPut           = "CRP answers a disk PUT with the fields the request had and fills the rest when the operation ends; azsim fills them at once"
	whyInstanceViewInPut = "azsim stores the instance view in the resource and answers a PUT with the stored document; CRP, like azsim's reads, shows it only with $expand=instanceView"
	whyNoImages          = "the image version \"latest\" resolved to; azsim has no image catalogue"
	whyNoOSDisks         = "azsim creates no managed disk behind an OS disk, so it names none"
	whyInstanceViewFacts = "azsim's instance view holds the computer name, domains, provisioning and power states only: no guest agent, OS, disk or host placement facts"
)
