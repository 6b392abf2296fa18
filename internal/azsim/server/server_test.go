package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azsim/middleware"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
)

const (
	sub = topology.DefaultSubscriptionID
	rg  = "rg-cluster"
)

func start(t *testing.T, opts Options) *Server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Start(ctx, opts)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = s.Close()
	})
	return s
}

func (s *Server) azOptions() azcore.ClientOptions {
	return azcore.ClientOptions{
		Cloud: cloud.Configuration{
			ActiveDirectoryAuthorityHost: s.URL() + "/",
			Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
				cloud.ResourceManager: {Endpoint: s.URL(), Audience: "https://management.azure.com/"},
			},
		},
		Transport: s.HTTPClient(),
	}
}

func secretCredential(t *testing.T, s *Server) azcore.TokenCredential {
	t.Helper()
	cred, err := azidentity.NewClientSecretCredential(DefaultTenantID, DefaultClientID, DefaultClientSecret,
		&azidentity.ClientSecretCredentialOptions{ClientOptions: s.azOptions(), DisableInstanceDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	return cred
}

func networkClients(t *testing.T, s *Server, cred azcore.TokenCredential) *armnetwork.ClientFactory {
	t.Helper()
	f, err := armnetwork.NewClientFactory(sub, cred, &arm.ClientOptions{ClientOptions: s.azOptions()})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

var networkTopology = &topology.Topology{
	ResourceGroups: []string{rg},
	VirtualNetworks: []topology.VirtualNetwork{{ResourceGroup: rg, Name: "vnet", AddressPrefixes: []string{"10.0.0.0/8"},
		Subnets: []topology.Subnet{{Name: "subnet", AddressPrefix: "10.240.0.0/16"}}}},
}

func createPIP(ctx context.Context, f *armnetwork.ClientFactory, name string) (armnetwork.PublicIPAddress, error) {
	poller, err := f.NewPublicIPAddressesClient().BeginCreateOrUpdate(ctx, rg, name, armnetwork.PublicIPAddress{
		Location: to.Ptr("eastus"),
		SKU:      &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard)},
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{
			PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic),
		},
	}, nil)
	if err != nil {
		return armnetwork.PublicIPAddress{}, err
	}
	res, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: 50 * time.Millisecond})
	return res.PublicIPAddress, err
}

func TestSDKClientsThroughServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	state := filepath.Join(t.TempDir(), "state.json")
	s := start(t, Options{StateFile: state, LRODuration: 200 * time.Millisecond, PollRetryAfter: 20 * time.Millisecond})
	if _, err := s.Seed(ctx, networkTopology); err != nil {
		t.Fatal(err)
	}
	cred := secretCredential(t, s)
	oldToken, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{"https://management.azure.com//.default"}})
	if err != nil {
		t.Fatal(err)
	}
	f := networkClients(t, s, cred)

	pip, err := createPIP(ctx, f, "pip-a")
	if err != nil {
		t.Fatal(err)
	}
	if pip.Properties == nil || pip.Properties.IPAddress == nil || *pip.Properties.ProvisioningState != armnetwork.ProvisioningStateSucceeded {
		t.Fatalf("pip = %+v", pip.Properties)
	}
	got, err := f.NewVirtualNetworksClient().Get(ctx, rg, "vnet", nil)
	if err != nil || len(got.Properties.Subnets) != 1 {
		t.Fatalf("vnet: %v %+v", err, got)
	}

	c := s.Client()
	st, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Sum("PUT", "publicIPAddresses", 201) != 1 || st.Reads("Microsoft.Network/publicIPAddresses") < 1 || st.Reads("virtualNetworks") != 1 {
		t.Errorf("stats after create: %+v", st.Requests)
	}
	if st.Writes("virtualNetworks") != 0 {
		t.Errorf("seeding was counted: %+v", st.Requests)
	}

	// 429 with Retry-After: azcore retries after the delay and succeeds.
	if _, err := c.AddFault(ctx, middleware.Fault{Kind: middleware.FaultThrottle, Method: "GET", ResourceType: "publicIPAddresses", Count: 1, RetryAfterSeconds: 1}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if _, err := f.NewPublicIPAddressesClient().Get(ctx, rg, "pip-a", nil); err != nil {
		t.Fatalf("GET after one 429: %v", err)
	}
	if time.Since(began) < 900*time.Millisecond {
		t.Errorf("client did not wait for Retry-After (took %v)", time.Since(began))
	}
	if st, _ := c.Stats(ctx); st.Sum("GET", "publicIPAddresses", 429) != 1 {
		t.Errorf("429 not counted: %+v", st.Requests)
	}

	// An LRO ending Failed reaches the SDK caller as the injected error code.
	if _, err := c.AddFault(ctx, middleware.Fault{Kind: middleware.FaultLROFailed, Method: "PUT", PathContains: "pip-b", Code: "AzsimInjected", Count: 1}); err != nil {
		t.Fatal(err)
	}
	_, err = createPIP(ctx, f, "pip-b")
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.ErrorCode != "AzsimInjected" {
		t.Fatalf("failed LRO: err = %v", err)
	}

	// 412 fault.
	if _, err := c.AddFault(ctx, middleware.Fault{Kind: middleware.FaultPrecondition, Method: "PUT", Count: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := createPIP(ctx, f, "pip-c"); !errors.As(err, &re) || re.StatusCode != 412 {
		t.Fatalf("412 fault: %v", err)
	}
	if fs, _ := c.Faults(ctx); len(fs) != 3 || fs[2].Hits != 1 {
		t.Errorf("faults = %+v", fs)
	}
	if err := c.ClearFaults(ctx); err != nil {
		t.Fatal(err)
	}

	// Prometheus text.
	m, err := c.Metrics(ctx)
	if err != nil || !strings.Contains(m, `azsim_arm_requests_total{class="write",method="PUT",resource_type="Microsoft.Network/publicIPAddresses",status="412"} 1`) {
		t.Errorf("metrics: %v\n%s", err, m)
	}

	// The state file carries resources and the token key across a restart on the same port.
	addr := strings.TrimPrefix(s.URL(), "https://")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := start(t, Options{StateFile: state, Addr: addr})
	if _, err := s2.Client().Get(ctx, "/subscriptions/"+sub+"/resourceGroups/"+rg+"/providers/Microsoft.Network/publicIPAddresses/pip-a"); err != nil {
		t.Fatalf("pip-a lost across restart: %v", err)
	}
	// A token issued before the restart is still accepted (the signing key is in the state).
	req, _ := http.NewRequest(http.MethodGet, s2.URL()+"/subscriptions/"+sub+"/resourceGroups/"+rg+"/providers/Microsoft.Network/publicIPAddresses/pip-a?api-version=2025-05-01", nil)
	req.Header.Set("Authorization", "Bearer "+oldToken.Token)
	resp, err := s2.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("old token after restart: %d", resp.StatusCode)
	}
}

func TestThrottlingModel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := start(t, Options{Throttle: &middleware.ThrottleModel{Enabled: true,
		Reads: middleware.Bucket{Capacity: 2, RefillPerSecond: 1}, Writes: middleware.Bucket{Capacity: 100, RefillPerSecond: 10},
		Deletes: middleware.Bucket{Capacity: 100, RefillPerSecond: 10}}})
	if _, err := s.Seed(ctx, networkTopology); err != nil {
		t.Fatal(err)
	}
	vnets := networkClients(t, s, secretCredential(t, s)).NewVirtualNetworksClient()
	for i := 0; i < 3; i++ {
		if _, err := vnets.Get(ctx, rg, "vnet", nil); err != nil {
			t.Fatalf("GET %d: %v", i, err)
		}
	}
	st, _ := s.Client().Stats(ctx)
	if st.Throttled < 1 || st.Sum("GET", "virtualNetworks", 429) < 1 || st.Sum("GET", "virtualNetworks", 200) != 3 {
		t.Errorf("stats: throttled=%d %+v", st.Throttled, st.Requests)
	}
}

func TestManagedIdentityAndMetadata(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := start(t, Options{})
	if _, err := s.Seed(ctx, networkTopology); err != nil {
		t.Fatal(err)
	}
	t.Setenv("IDENTITY_ENDPOINT", s.IMDSURL()+"/msi/token")
	t.Setenv("IDENTITY_HEADER", DefaultIdentityHeader)
	cred, err := azidentity.NewManagedIdentityCredential(&azidentity.ManagedIdentityCredentialOptions{ClientOptions: s.azOptions()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := networkClients(t, s, cred).NewVirtualNetworksClient().Get(ctx, rg, "vnet", nil); err != nil {
		t.Fatalf("ARM call with managed identity: %v", err)
	}

	hc := s.HTTPClient()
	resp, err := hc.Get(s.URL() + "/metadata/endpoints?api-version=2019-05-01")
	if err != nil {
		t.Fatal(err)
	}
	var clouds []map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&clouds)
	resp.Body.Close()
	if len(clouds) != 1 || clouds[0]["resourceManager"] != s.URL()+"/" {
		t.Errorf("metadata endpoints = %v", clouds)
	}

	// IMDS token endpoint.
	req, _ := http.NewRequest(http.MethodGet, s.IMDSURL()+"/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https://management.azure.com/&client_id="+DefaultUserMIClientID, nil)
	req.Header.Set("Metadata", "true")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var tok map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	if resp.StatusCode != 200 || tok["client_id"] != DefaultUserMIClientID || tok["access_token"] == "" {
		t.Fatalf("IMDS token: %d %v", resp.StatusCode, tok)
	}
	// That token is good for ARM; no token is not.
	for _, tc := range []struct {
		auth string
		want int
	}{{"Bearer " + tok["access_token"], 200}, {"", 401}, {"Bearer nonsense", 401}} {
		req, _ := http.NewRequest(http.MethodGet, s.URL()+"/subscriptions/"+sub+"/resourceGroups/"+rg+"?api-version=2021-04-01", nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("auth %q: %d, want %d", tc.auth, resp.StatusCode, tc.want)
		}
	}
	// The subscription list (az login).
	req, _ = http.NewRequest(http.MethodGet, s.URL()+"/subscriptions?api-version=2019-11-01", nil)
	req.Header.Set("Authorization", "Bearer "+tok["access_token"])
	resp, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var subs struct {
		Value []struct{ SubscriptionID, TenantID, State string }
	}
	_ = json.NewDecoder(resp.Body).Decode(&subs)
	resp.Body.Close()
	if len(subs.Value) != 1 || subs.Value[0].SubscriptionID != sub || subs.Value[0].TenantID != DefaultTenantID || subs.Value[0].State != "Enabled" {
		t.Errorf("subscriptions = %+v", subs)
	}
}
