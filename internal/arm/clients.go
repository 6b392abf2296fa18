// Package arm is the ARM access layer: the Azure SDK clients for the configured cloud, built
// with one credential and one set of pipeline policies (throttle gate, bounded retries,
// coalesced GETs, metrics), plus list-based caches that writers invalidate.
package arm

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azarm "github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	armpolicy "github.com/Azure/azure-sdk-for-go/sdk/azcore/arm/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v3"

	"github.com/azure-ccm/azure-ccm/internal/config"
)

// ProvidersAPIVersion is the api-version of the providers GET, the one the existing provider
// uses (the SDK's newer default would change the wire request for no benefit).
const ProvidersAPIVersion = "2021-04-01"

// Options customises New. Every field is optional.
type Options struct {
	// Credential replaces the one built from the configuration.
	Credential azcore.TokenCredential
	// NetworkCredential replaces the one built for networkResourceTenantID.
	NetworkCredential azcore.TokenCredential
	// Transport is the HTTP client for ARM and for login (e.g. one that trusts azsim's CA).
	Transport policy.Transporter
	// Environment replaces ResolveEnvironment (which may fetch the metadata document).
	Environment *config.Environment
	// Metrics defaults to DefaultMetrics() (registered on /metrics).
	Metrics *Metrics
	// Gate defaults to a new gate with default options.
	Gate *Gate
	// Retry replaces the retry settings derived from the configuration.
	Retry *policy.RetryOptions
	// PollFrequency for long-running operations; default 5s (ARM's Retry-After overrides it).
	PollFrequency time.Duration
	// Now is the clock of the caches (tests).
	Now func() time.Time
	// LoginHealth, when set, follows the outcome of every token request (LoginHealth).
	LoginHealth *LoginHealth
	// ApplicationID starts the User-Agent of every request (at most 24 characters), so that
	// Azure's activity log and request counters tell the programs apart; default azure.json's
	// userAgent ("azure-ccm").
	ApplicationID string
}

// Clients holds every SDK client, all sharing one pipeline configuration.
type Clients struct {
	Config      *config.Config
	Environment config.Environment
	Credential  azcore.TokenCredential
	AuthMethod  AuthMethod

	// Network is for cluster network resources (LB, PIP, NSG, route table, VNet) in the
	// network subscription (networkResourceSubscriptionID or subscriptionId).
	Network *armnetwork.ClientFactory
	// NetworkPipeline is Network's pipeline (same credential and policies) for requests the CCM
	// builds itself: load balancer, backend pool and NSG documents encoded without the SDK's
	// generated methods (azstore.RawClient).
	NetworkPipeline *azarm.Client
	// NodeNetwork is for node NICs, in the compute subscription.
	NodeNetwork *armnetwork.ClientFactory
	// Compute is for VMs, scale sets and availability sets.
	Compute *armcompute.ClientFactory
	// Providers reads resource provider metadata (region -> zones).
	Providers *armresources.ProvidersClient

	Gate          *Gate
	Metrics       *Metrics
	Caches        *Caches
	PollFrequency time.Duration

	coalescer *coalescePolicy
}

// DefaultRetry is azcore's retry policy, bounded and exponential with
// jitter (azcore adds it), for 408 and 5xx only. 429 is left to the throttle gate.
func DefaultRetry(cfg *config.Config) policy.RetryOptions {
	r := policy.RetryOptions{
		MaxRetries:    3,
		RetryDelay:    2 * time.Second,
		MaxRetryDelay: 60 * time.Second,
		TryTimeout:    60 * time.Second,
		StatusCodes: []int{http.StatusRequestTimeout, http.StatusInternalServerError, http.StatusBadGateway,
			http.StatusServiceUnavailable, http.StatusGatewayTimeout},
	}
	if cfg != nil && cfg.CloudProviderBackoff {
		r.MaxRetries = int32(min(cfg.CloudProviderBackoffRetries, math.MaxInt32)) //nolint:gosec // G115: clamped
		r.RetryDelay = time.Duration(cfg.CloudProviderBackoffDuration) * time.Second
	}
	return r
}

// New builds the clients. It makes no network call unless the environment has to be resolved
// from resourceManagerEndpoint (one metadata GET).
func New(ctx context.Context, cfg *config.Config, o Options) (*Clients, error) {
	var env config.Environment
	if o.Environment != nil {
		env = *o.Environment
	} else {
		var hc *http.Client
		if c, ok := o.Transport.(*http.Client); ok {
			hc = c
		}
		var err error
		if env, err = config.ResolveEnvironment(ctx, cfg, nil, hc); err != nil {
			return nil, err
		}
	}
	c := &Clients{Config: cfg, Environment: env, Credential: o.Credential, Gate: o.Gate, Metrics: o.Metrics,
		PollFrequency: o.PollFrequency}
	if c.Metrics == nil {
		c.Metrics = DefaultMetrics()
	}
	if c.Gate == nil {
		c.Gate = NewGate(GateOptions{}, c.Metrics)
	}
	c.coalescer = &coalescePolicy{metrics: c.Metrics}
	if c.PollFrequency <= 0 {
		c.PollFrequency = 5 * time.Second
	}
	if c.Credential == nil {
		cred, method, err := NewCredential(cfg, env, o.Transport)
		if err != nil {
			return nil, err
		}
		c.Credential, c.AuthMethod = cred, method
		LogLoginEndpoint(env, cfg.TenantID, method)
	}
	if o.LoginHealth != nil {
		c.Credential = &watchedCredential{cred: c.Credential, health: o.LoginHealth}
	}
	retry := DefaultRetry(cfg)
	if o.Retry != nil {
		retry = *o.Retry
	}
	appID := cfg.UserAgent
	if o.ApplicationID != "" {
		appID = o.ApplicationID
	}
	if len(appID) > 24 {
		appID = appID[:24]
	}
	base := armpolicy.ClientOptions{
		ClientOptions: policy.ClientOptions{
			Cloud:            env.CloudConfiguration(),
			Transport:        o.Transport,
			Retry:            retry,
			Telemetry:        policy.TelemetryOptions{ApplicationID: appID},
			PerCallPolicies:  []policy.Policy{c.coalescer},
			PerRetryPolicies: []policy.Policy{gatePolicy{gate: c.Gate, metrics: c.Metrics}, metricsPolicy{m: c.Metrics}},
		},
		// The CCM must not try to register resource providers on the user's subscription.
		DisableRPRegistration: true,
	}
	if cfg.IsStackCloud() {
		base.PerCallPolicies = append(base.PerCallPolicies, stackPolicy{})
	}

	// Network resources in another tenant (networkResourceTenantID): network calls log in
	// there and carry a token of the cluster's tenant, the cluster's calls the reverse, so that
	// ARM accepts links between the two (pools and NICs, subnets and NICs).
	netCred, netOpts, clusterOpts := c.Credential, base.Clone(), base.Clone()
	if CrossTenant(cfg) {
		netCred = o.NetworkCredential
		if netCred == nil {
			var err error
			if netCred, err = NetworkTenantCredential(cfg, env, o.Transport); err != nil {
				return nil, err
			}
		}
		if o.LoginHealth != nil {
			netCred = &watchedCredential{cred: netCred, health: o.LoginHealth}
		}
		netOpts = withAuxiliary(base, c.Credential, env.TokenAudience, cfg.TenantID)
		clusterOpts = withAuxiliary(base, netCred, env.TokenAudience, cfg.NetworkResourceTenantID)
	}
	var err error
	if c.Network, err = armnetwork.NewClientFactory(cfg.NetworkSubscriptionID(), netCred, netOpts); err != nil {
		return nil, fmt.Errorf("network client: %w", err)
	}
	if c.NetworkPipeline, err = azarm.NewClient("azure-ccm", "v1.0.0", netCred, netOpts.Clone()); err != nil {
		return nil, fmt.Errorf("network client: %w", err)
	}
	c.NodeNetwork = c.Network
	if !strings.EqualFold(cfg.NetworkSubscriptionID(), cfg.SubscriptionID) || CrossTenant(cfg) {
		if c.NodeNetwork, err = armnetwork.NewClientFactory(cfg.SubscriptionID, c.Credential, clusterOpts.Clone()); err != nil {
			return nil, fmt.Errorf("node network client: %w", err)
		}
	}
	if c.Compute, err = armcompute.NewClientFactory(cfg.SubscriptionID, c.Credential, clusterOpts.Clone()); err != nil {
		return nil, fmt.Errorf("compute client: %w", err)
	}
	popts := base.Clone()
	popts.APIVersion = ProvidersAPIVersion
	if c.Providers, err = armresources.NewProvidersClient(cfg.SubscriptionID, c.Credential, popts); err != nil {
		return nil, fmt.Errorf("providers client: %w", err)
	}
	c.Caches = newCaches(c, cfg, o.Now)
	return c, nil
}

// RegionZones reads the region -> availability zones map of virtual machines from the
// Microsoft.Compute provider (one GET). Region keys are lower case without spaces.
func (c *Clients) RegionZones(ctx context.Context) (map[string][]string, error) {
	resp, err := c.Providers.Get(ctx, "Microsoft.Compute", nil)
	if err != nil {
		return nil, fmt.Errorf("reading the zones of Microsoft.Compute/virtualMachines: %w", err)
	}
	out := map[string][]string{}
	for _, rt := range resp.ResourceTypes {
		if rt == nil || rt.ResourceType == nil || !strings.EqualFold(*rt.ResourceType, "virtualMachines") {
			continue
		}
		for _, zm := range rt.ZoneMappings {
			if zm == nil || zm.Location == nil {
				continue
			}
			region := NormalizeLocation(*zm.Location)
			for _, z := range zm.Zones {
				if z != nil {
					out[region] = append(out[region], *z)
				}
			}
		}
	}
	return out, nil
}

// NormalizeLocation turns "East US" into "eastus".
func NormalizeLocation(l string) string { return strings.ToLower(strings.ReplaceAll(l, " ", "")) }
