package arm_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/server"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	"github.com/azure-ccm/azure-ccm/internal/config"
)

const (
	netTenant = "77777777-7777-7777-7777-777777777777"
	netSub    = "00000000-0000-0000-0000-0000000000aa"
)

// TestNetworkTenantAgainstAzsim: azsim puts the network subscription in a second tenant. With
// networkResourceTenantID the CCM's clients reach both subscriptions; without it the network
// calls fail with ARM's wrong-tenant error; a network-tenant token without the auxiliary header
// is refused as a linked-authorization failure.
func TestNetworkTenantAgainstAzsim(t *testing.T) {
	creds := server.DefaultCredentials()
	creds.Tenants = []string{netTenant}
	creds.SubscriptionTenants = map[string]string{netSub: netTenant}
	sim, err := server.Start(context.Background(), server.Options{Credentials: &creds})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })

	clientsFor := func(t *testing.T, extra string) (*arm.Clients, *config.Config, config.Environment) {
		t.Helper()
		cfg, err := config.Parse([]byte(fmt.Sprintf(`{"cloud":"AzureStackCloud","tenantId":%q,"subscriptionId":%q,
			"networkResourceSubscriptionID":%q,"aadClientId":%q,"aadClientSecret":%q,"resourceGroup":"rg","location":"eastus"%s}`,
			server.DefaultTenantID, topology.DefaultSubscriptionID, netSub, server.DefaultClientID, server.DefaultClientSecret, extra)), nil)
		if err != nil {
			t.Fatal(err)
		}
		env, err := config.ResolveEnvironment(context.Background(), cfg, sim.LookupEnvironmentFile, nil)
		if err != nil {
			t.Fatal(err)
		}
		c, err := arm.New(context.Background(), cfg, arm.Options{Transport: sim.HTTPClient(), Environment: &env, Metrics: arm.NewMetrics(),
			Retry: &policy.RetryOptions{MaxRetries: -1}})
		if err != nil {
			t.Fatal(err)
		}
		return c, cfg, env
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	t.Run("with networkResourceTenantID", func(t *testing.T) {
		c, cfg, env := clientsFor(t, fmt.Sprintf(`,"networkResourceTenantID":%q`, netTenant))
		if _, err := c.Network.NewPublicIPAddressesClient().NewListAllPager(nil).NextPage(ctx); err != nil {
			t.Errorf("network subscription: %v", err)
		}
		if _, err := c.Compute.NewVirtualMachinesClient().NewListAllPager(nil).NextPage(ctx); err != nil {
			t.Errorf("cluster subscription: %v", err)
		}

		// The network tenant's token alone, without the auxiliary header.
		cred, err := arm.NetworkTenantCredential(cfg, env, sim.HTTPClient())
		if err != nil {
			t.Fatal(err)
		}
		tok, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{env.TokenAudience + "/.default"}})
		if err != nil {
			t.Fatal(err)
		}
		call := func(method, path, body string) int {
			t.Helper()
			req, _ := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(env.ResourceManagerEndpoint, "/")+
				"/subscriptions/"+netSub+path+"?api-version=2024-05-01", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+tok.Token)
			req.Header.Set("Content-Type", "application/json")
			resp, err := sim.HTTPClient().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			return resp.StatusCode
		}
		// A read in the network tenant needs no home-tenant token; a write links resources of
		// both tenants and does.
		if st := call(http.MethodGet, "/providers/Microsoft.Network/publicIPAddresses", ""); st != http.StatusOK {
			t.Errorf("GET without %s: status %d, want 200", arm.HeaderAuxiliary, st)
		}
		if st := call(http.MethodPut, "/resourceGroups/rg/providers/Microsoft.Network/publicIPAddresses/pip-aux",
			`{"location":"eastus","sku":{"name":"Standard"},"properties":{"publicIPAllocationMethod":"Static"}}`); st != http.StatusForbidden {
			t.Errorf("PUT without %s: status %d, want 403", arm.HeaderAuxiliary, st)
		}
	})

	t.Run("without networkResourceTenantID", func(t *testing.T) {
		c, _, _ := clientsFor(t, "")
		_, err := c.Network.NewPublicIPAddressesClient().NewListAllPager(nil).NextPage(ctx)
		if err == nil || !strings.Contains(err.Error(), "InvalidAuthenticationTokenTenant") || !strings.Contains(err.Error(), netTenant) {
			t.Errorf("network call with the cluster tenant's token: %v; want InvalidAuthenticationTokenTenant naming %s", err, netTenant)
		}
	})
}
