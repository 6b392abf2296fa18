package arm

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	armpolicy "github.com/Azure/azure-sdk-for-go/sdk/azcore/arm/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/azure-ccm/azure-ccm/internal/config"
)

// HeaderAuxiliary carries a token of another tenant on an ARM request that links resources
// across tenants (a load balancer in the network tenant and the cluster's NICs, for example).
const HeaderAuxiliary = "x-ms-authorization-auxiliary"

// CrossTenant reports whether network resources live in another tenant than the cluster's.
func CrossTenant(cfg *config.Config) bool {
	return cfg.NetworkResourceTenantID != "" && !strings.EqualFold(cfg.NetworkResourceTenantID, cfg.TenantID)
}

// NetworkTenantCredential is the same login (client secret, certificate or workload identity)
// in networkResourceTenantID: the app registration must exist in both tenants, as for the
// existing provider. Managed identities belong to one tenant: config validation refuses them
// with networkResourceTenantID.
func NetworkTenantCredential(cfg *config.Config, env config.Environment, transport policy.Transporter) (azcore.TokenCredential, error) {
	c := *cfg
	c.TenantID = cfg.NetworkResourceTenantID
	cred, _, err := NewCredential(&c, env, transport)
	if err != nil {
		return nil, fmt.Errorf("networkResourceTenantID %s: %w", cfg.NetworkResourceTenantID, err)
	}
	return cred, nil
}

// auxiliaryPolicy adds a token of another tenant to every request. azidentity caches tokens, so
// asking for one per request costs nothing once it is cached.
type auxiliaryPolicy struct {
	cred   azcore.TokenCredential
	scope  string
	tenant string
}

func (p auxiliaryPolicy) Do(req *policy.Request) (*http.Response, error) {
	tok, err := p.cred.GetToken(req.Raw().Context(), policy.TokenRequestOptions{Scopes: []string{p.scope}})
	if err != nil {
		return nil, fmt.Errorf("token of tenant %s for the %s header: %w", p.tenant, HeaderAuxiliary, err)
	}
	req.Raw().Header.Set(HeaderAuxiliary, "Bearer "+tok.Token)
	return req.Next()
}

// withAuxiliary returns base whose requests also carry a token of tenant (from cred).
func withAuxiliary(base armpolicy.ClientOptions, cred azcore.TokenCredential, audience, tenant string) *armpolicy.ClientOptions {
	o := base.Clone()
	// The scope the SDK's own bearer policy asks for, so both tokens are for one audience.
	scope := audience + "/.default"
	o.PerRetryPolicies = append(append([]policy.Policy(nil), o.PerRetryPolicies...), auxiliaryPolicy{cred: cred, scope: scope, tenant: tenant})
	return o
}
