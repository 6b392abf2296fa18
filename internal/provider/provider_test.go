package provider

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/config"
)

func TestNewRejectsConfigErrorsAtOnce(t *testing.T) {
	_, err := NewFromBytes(context.Background(), []byte(`{"subscriptionId":"s","resourceGroup":"rg","location":"l","loadBalancerSku":"Premium"}`), Options{})
	if err == nil || !strings.Contains(err.Error(), `loadBalancerSku: "Premium"`) {
		t.Fatalf("got %v", err)
	}
	_, err = NewFromBytes(context.Background(), []byte(`{"subscriptionId":"s","resourceGroup":"rg","location":"l"}`), Options{})
	if err == nil || !strings.Contains(err.Error(), "no credentials configured") {
		t.Fatalf("got %v", err)
	}
}

type staticCred struct{}

func (staticCred) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: "t", ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// ARM failing at start-up is retried with backoff until it works, not fatal.
func TestNewRetriesARMFailures(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			http.Error(w, `{"error":{"code":"BadRequest","message":"not yet"}}`, http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte(`{"resourceTypes":[{"resourceType":"virtualMachines","zoneMappings":[{"location":"eastus","zones":["1"]}]}]}`))
	}))
	defer srv.Close()
	cfg, err := config.Parse([]byte(`{"subscriptionId":"s","resourceGroup":"rg","location":"eastus","useManagedIdentityExtension":true}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := New(ctx, cfg, Options{StartupBackoff: 10 * time.Millisecond, ARM: arm.Options{
		Credential: staticCred{}, Transport: srv.Client(), Metrics: arm.NewMetrics(),
		Environment: &config.Environment{ResourceManagerEndpoint: srv.URL, TokenAudience: "https://aud/", ActiveDirectoryEndpoint: "https://login/"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 3 || strings.Join(c.RegionZones(), ",") != "1" {
		t.Fatalf("calls=%d zones=%v", calls.Load(), c.RegionZones())
	}
	if _, ok := c.LoadBalancer(); ok {
		t.Error("LoadBalancer must be unavailable without a builder")
	}
	if _, ok := c.Routes(); ok {
		t.Error("Routes must be unavailable without routeTableName")
	}
	// A start-up that never succeeds ends with the context, naming the last error. The context
	// ends once ARM has refused twice (not after a wall-clock time, which a loaded machine may
	// spend before the first answer); the attempt it cuts short is not the error reported.
	short, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	var refused atomic.Int32
	srv2 := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"code":"AuthorizationFailed","message":"denied"}}`, http.StatusForbidden)
		if refused.Add(1) == 2 {
			cancel2()
		}
	}))
	defer srv2.Close()
	_, err = New(short, cfg, Options{StartupBackoff: 10 * time.Millisecond, ARM: arm.Options{
		Credential: staticCred{}, Transport: srv2.Client(), Metrics: arm.NewMetrics(),
		Environment: &config.Environment{ResourceManagerEndpoint: srv2.URL, TokenAudience: "https://aud/", ActiveDirectoryEndpoint: "https://login/"},
	}})
	if err == nil || !strings.Contains(err.Error(), "AuthorizationFailed") {
		t.Fatalf("got %v", err)
	}
}
