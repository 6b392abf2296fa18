package compute

import (
	"net/http"
	"testing"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/network"
	"github.com/azure-ccm/azure-ccm/internal/azsim/recordings"
)

// TestRecordedComputeTraffic replays recorded CRP exchanges against the engine with the
// compute types and requires the recorded status codes, error codes, ETag values and polling
// URL shapes. Keys the recording has and azsim lacks are logged.
func TestRecordedComputeTraffic(t *testing.T) {
	dir := recordings.Dir(t)
	for _, name := range []string{"availabilityset", "disk", "virtualmachine", "virtualmachinescaleset", "virtualmachinescalesetvm"} {
		t.Run(name, func(t *testing.T) {
			c := recordings.Load(t, dir, name)
			e := arm.NewEngine(arm.Config{BaseURL: func() string { return recordings.ARMHost }})
			network.Register(e)
			// The recordings were made in eastus2, which has zones in Azure.
			Register(e, Config{Locations: []Location{{Name: "eastus2", DisplayName: "East US 2", Zones: []string{"1", "2", "3"}}}})
			recordings.Replay(t, name, c, e, recordings.Options{Deviations: deviations})
		})
	}
}

// deviations are recorded answers azsim knowingly does not reproduce.
var deviations = map[string]recordings.Deviation{
	"virtualmachine#19": {Status: http.StatusOK, Why: "NIC DELETE: NRP answered 202 here and 200 in interface.yaml; the network handlers answer 200"},
}
