//go:build chaos

package chaos

import (
	"testing"
	"time"
)

// TestChaos is `make chaos`: 30 minutes by default with 10% ARM faults, one step in ten a third
// party's edit of a service's Azure objects, one update in five of a public service a move of
// its public IP to the other resource group, and a CCM restart every three minutes, on a seed
// from the clock unless CHAOS_SEED is set. Every CHAOS_* variable of OptionsFromEnv applies.
func TestChaos(t *testing.T) {
	Run(t, OptionsFromEnv(t, Options{
		Seed:            uint64(time.Now().UnixNano()),
		Duration:        30 * time.Minute,
		FaultRate:       0.10,
		RestartEvery:    3 * time.Minute,
		MaxServices:     40,
		Nodes:           10,
		ConvergeTimeout: 10 * time.Minute,
		DriftPercent:    10,
		PIPGroupPercent: 20,
	}))
}
