//go:build !chaos

package chaos

import (
	"testing"
	"time"
)

// TestChaosShort is the variant `make test` runs: a minute of random service and node changes
// (one step in ten a third party's edit of a service's Azure objects; about a third of the
// updates of public services move their public IP to the other resource group and back) with
// 10% ARM faults and two CCM restarts, on a fixed seed (CHAOS_* overrides, e.g. a seed a long
// run reported).
func TestChaosShort(t *testing.T) {
	Run(t, OptionsFromEnv(t, Options{
		Seed:            1,
		Duration:        60 * time.Second,
		FaultRate:       0.10,
		RestartEvery:    25 * time.Second,
		MaxServices:     10,
		Nodes:           4,
		ConvergeTimeout: 6 * time.Minute,
		DriftPercent:    10,
		PIPGroupPercent: 30,
	}))
}
