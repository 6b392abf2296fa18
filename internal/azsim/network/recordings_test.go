package network

import (
	"net/http"
	"testing"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/recordings"
)

// TestRecordedNetworkTraffic replays the recorded request sequences against the engine and
// requires the same status codes and error codes, ETag shapes and polling URL shapes. Body
// differences in server-filled defaults are logged, not failed.
func TestRecordedNetworkTraffic(t *testing.T) {
	dir := recordings.Dir(t)
	for _, name := range []string{"resourcegroup", "virtualnetwork", "subnet", "securitygroup", "routetable", "publicipaddress",
		"publicipprefix", "loadbalancer", "backendaddresspool", "interface", "natgateway", "servicegateway"} {
		t.Run(name, func(t *testing.T) {
			c := recordings.Load(t, dir, name)
			e := arm.NewEngine(arm.Config{BaseURL: func() string { return recordings.ARMHost }})
			Register(e)
			recordings.Replay(t, name, c, e, recordings.Options{Deviations: knownDeviations, PreexistingCreate: true})
		})
	}
}

// knownDeviations are recorded answers azsim deliberately does not copy.
var knownDeviations = map[string]recordings.Deviation{
	"virtualnetwork#6": {Status: http.StatusOK, Why: "NRP answered 201 to an update of an existing VNet; azsim answers updates with 200 as every other NRP type does"},
}
