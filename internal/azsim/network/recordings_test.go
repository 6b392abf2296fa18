package network

import (
	"maps"
	"net/http"
	"testing"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/recordings"
)

// TestRecordedNetworkTraffic replays the recorded request sequences against the engine and
// requires the same status codes and error codes, ETag shapes, polling URL shapes and body
// keys; the body differences azsim keeps on purpose are bodyDifferences, each of which must
// still occur and be documented in docs/azsim.md.
func TestRecordedNetworkTraffic(t *testing.T) {
	dir := recordings.Dir(t)
	cassettes := []string{"resourcegroup", "virtualnetwork", "subnet", "securitygroup", "routetable", "publicipaddress",
		"publicipprefix", "loadbalancer", "backendaddresspool", "interface", "natgateway", "servicegateway"}
	found, replayed := map[string]bool{}, 0
	for _, name := range cassettes {
		t.Run(name, func(t *testing.T) {
			c := recordings.Load(t, dir, name)
			e := arm.NewEngine(arm.Config{BaseURL: func() string { return recordings.ARMHost }})
			Register(e)
			maps.Copy(found, recordings.Replay(t, name, c, e, recordings.Options{Deviations: knownDeviations, PreexistingCreate: true,
				BodyDifferences: bodyDifferences}))
			replayed++
		})
	}
	if replayed == len(cassettes) { // not when -run picked some
		recordings.CheckBodyDifferences(t, bodyDifferences, found)
	}
	recordings.CheckDocumented(t, bodyDifferences)
}

// knownDeviations are recorded answers azsim deliberately does not copy.
var knownDeviations = map[string]recordings.Deviation{
	"virtualnetwork#6": {Status: http.StatusOK, Why: "NRP answered 201 to an update of an existing VNet; azsim answers updates with 200 as every other NRP type does"},
}

// bodyDifferences are the differences between azsim's answer bodies and NRP's that azsim keeps
// on purpose (recordings.BodyDifferenceKey → why).
var bodyDifferences = map[string]string{
	"Microsoft.Resources/resourceGroups missing .tags":                 "a policy of the recording's subscription tagged new resource groups (createdAt); ARM adds no tags",
	"Microsoft.Network/networkInterfaces extra .properties.macAddress": "azsim gives a network interface its MAC address when it is created; NRP gives it one when a VM using it starts",
	"Microsoft.Network/publicIPAddresses extra .properties.ipAddress":  "azsim allocates the address in the PUT; NRP's PUT answer shows it once the create operation ended",
	"Microsoft.Network/publicIPPrefixes extra .properties.ipPrefix":    "azsim allocates the prefix in the PUT; NRP's PUT answer shows it once the create operation ended",
}
