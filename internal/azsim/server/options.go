// Package server assembles azsim: one HTTPS listener for ARM (engine behind the middleware),
// Entra ID, cloud metadata and the control API, and one plain-HTTP listener for IMDS. Tests
// run azsim in-process through Start; cmd/azsim wraps the same API.
package server

import (
	"time"

	"github.com/azure-ccm/azure-ccm/internal/azsim/identity"
	"github.com/azure-ccm/azure-ccm/internal/azsim/middleware"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
)

// Default identities, so a zero Options works and docs/tests can name them.
const (
	DefaultTenantID       = "11111111-1111-1111-1111-111111111111"
	DefaultClientID       = "22222222-2222-2222-2222-222222222222"
	DefaultClientSecret   = "azsim-client-secret" //nolint:gosec // G101: the simulator's documented default, not a real credential
	DefaultMIClientID     = "33333333-3333-3333-3333-333333333333"
	DefaultUserMIClientID = "44444444-4444-4444-4444-444444444444"
	DefaultIdentityHeader = "azsim-identity-header"
)

// Options configure Start. Zero values take the defaults named on each field.
type Options struct {
	// Addr is the HTTPS listener (default "127.0.0.1:0").
	Addr string
	// IMDSAddr is the plain-HTTP IMDS listener (default "127.0.0.1:0"; "off" disables it).
	IMDSAddr string
	// Dir receives ca.pem and ca-bundle.pem (default: a new temporary directory, removed by Close).
	Dir string
	// StateFile, if set, is loaded at start when it exists and written by Close.
	StateFile string
	// ExtraNames are added to the server certificate (DNS names or IPs).
	ExtraNames []string
	// Credentials are the accepted identities (default: DefaultCredentials()).
	Credentials *identity.Credentials
	// SubscriptionID and Location are the defaults for topologies that name none and for the
	// subscription list (default topology.DefaultSubscriptionID, "eastus").
	SubscriptionID string
	Location       string
	// CloudName is the name in /metadata/endpoints (default "AzureCloud").
	CloudName string
	// LRODuration is how long writes stay in progress (default 0: complete at once).
	LRODuration time.Duration
	// PollRetryAfter, if set, is sent as retry-after-ms while operations run, so clients poll
	// faster than the SDK's default.
	PollRetryAfter time.Duration
	// PageSize is the list page size (default 100).
	PageSize int
	// TokenLifetime is the access token lifetime (default 1h).
	TokenLifetime time.Duration
	// Latency, Throttle and FaultSeed configure the middleware (defaults: no latency, ARM's
	// throttling limits switched off, seed 1).
	Latency   middleware.LatencyModel
	Throttle  *middleware.ThrottleModel
	FaultSeed uint64
	// Topology, if set, is seeded at start (after the state file is loaded).
	Topology *topology.Topology
	// Logf, if set, receives one line per notable event.
	Logf func(format string, args ...any)
}

// DefaultCredentials accepts the default service principal (secret) and two managed identities
// (system-assigned DefaultMIClientID, user-assigned DefaultUserMIClientID).
func DefaultCredentials() identity.Credentials {
	return identity.Credentials{
		TenantID: DefaultTenantID,
		Clients:  []identity.Client{{ClientID: DefaultClientID, Secret: DefaultClientSecret}},
		ManagedIdentities: []identity.ManagedIdentity{
			{ClientID: DefaultMIClientID, System: true},
			{ClientID: DefaultUserMIClientID, ResourceID: "/subscriptions/" + topology.DefaultSubscriptionID +
				"/resourceGroups/rg-identity/providers/Microsoft.ManagedIdentity/userAssignedIdentities/azsim-user"},
		},
		IdentityHeader: DefaultIdentityHeader,
	}
}
