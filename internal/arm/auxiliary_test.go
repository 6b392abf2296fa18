package arm

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/azure-ccm/azure-ccm/internal/config"
)

// tenantCred hands out a token naming its tenant and the scope asked for.
type tenantCred string

func (c tenantCred) GetToken(_ context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: string(c) + "|" + strings.Join(o.Scopes, " "), ExpiresOn: time.Now().Add(time.Hour)}, nil
}

func TestNetworkTenantCallsCarryBothTokens(t *testing.T) {
	type seen struct{ auth, aux string }
	var mu sync.Mutex
	got := map[string]seen{} // by subscription
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sub := strings.Split(r.URL.Path, "/")[2]
		mu.Lock()
		got[sub] = seen{r.Header.Get("Authorization"), r.Header.Get(HeaderAuxiliary)}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"value":[]}`))
	}))
	defer srv.Close()
	for _, c := range []struct {
		name         string
		doc          string
		wantNet      seen
		wantCluster  seen
		separateNode bool
	}{
		{"one tenant: no auxiliary header", `{"subscriptionId":"sub","networkResourceSubscriptionID":"netsub","tenantId":"home","aadClientId":"a","aadClientSecret":"sekrit","resourceGroup":"rg","location":"eastus"}`,
			seen{"Bearer home|https://aud//.default", ""}, seen{"Bearer home|https://aud//.default", ""}, true},
		{"network tenant: each side carries the other's token", `{"subscriptionId":"sub","networkResourceSubscriptionID":"netsub","tenantId":"home","networkResourceTenantID":"net","aadClientId":"a","aadClientSecret":"sekrit","resourceGroup":"rg","location":"eastus"}`,
			seen{"Bearer net|https://aud//.default", "Bearer home|https://aud//.default"}, seen{"Bearer home|https://aud//.default", "Bearer net|https://aud//.default"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(c.doc), nil)
			if err != nil {
				t.Fatal(err)
			}
			cl, err := New(context.Background(), cfg, Options{
				Credential: tenantCred("home"), NetworkCredential: tenantCred("net"), Transport: srv.Client(),
				Environment: &config.Environment{ResourceManagerEndpoint: srv.URL, TokenAudience: "https://aud/", ActiveDirectoryEndpoint: "https://login.local/"},
				Metrics:     NewMetrics(),
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, err := cl.Network.NewLoadBalancersClient().NewListPager("rg", nil).NextPage(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := cl.Compute.NewVirtualMachinesClient().NewListPager("rg", nil).NextPage(ctx); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if got["netsub"] != c.wantNet {
				t.Errorf("network call: %+v, want %+v", got["netsub"], c.wantNet)
			}
			if got["sub"] != c.wantCluster {
				t.Errorf("cluster call: %+v, want %+v", got["sub"], c.wantCluster)
			}
		})
	}
}
