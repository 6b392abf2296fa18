package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/azure-ccm/azure-ccm/internal/azsim/client"
	"github.com/azure-ccm/azure-ccm/internal/azsim/middleware"
)

func TestControlAPIThroughClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := start(t, Options{})
	c := s.Client()

	info, err := c.Info(ctx)
	if err != nil || info.URL != s.URL() || info.TenantID != DefaultTenantID || info.CAFile != s.CAFile() {
		t.Fatalf("info = %+v, %v", info, err)
	}
	res, err := c.SeedYAML(ctx, []byte("resourceGroups: [rg-a]\nvirtualNetworks: [{resourceGroup: rg-a, name: v, addressPrefixes: [10.0.0.0/8], subnets: [{name: s, addressPrefix: 10.1.0.0/16}]}]\n"))
	if err != nil || res.SubscriptionID != sub {
		t.Fatalf("seed: %+v %v", res, err)
	}
	if _, err := c.SeedYAML(ctx, []byte("resourceGroupz: [x]")); err == nil {
		t.Error("seed with an unknown key accepted")
	}
	vnets, err := c.List(ctx, "Microsoft.Network/virtualNetworks")
	if err != nil || len(vnets) != 1 || vnets[0]["name"] != "v" {
		t.Fatalf("list: %v %v", vnets, err)
	}
	if _, err := c.Get(ctx, "/subscriptions/"+sub+"/resourceGroups/rg-a/providers/Microsoft.Network/virtualNetworks/nope"); !client.IsNotFound(err) {
		t.Errorf("get missing: %v", err)
	}

	lat := middleware.LatencyModel{Rules: []middleware.LatencyRule{{Class: middleware.Write, Delay: middleware.Duration(time.Second)}}}
	if err := c.SetLatency(ctx, lat); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Latency(ctx); err != nil || len(got.Rules) != 1 || got.Rules[0].Delay != middleware.Duration(time.Second) {
		t.Errorf("latency = %+v %v", got, err)
	}
	th := middleware.DefaultThrottle()
	th.Enabled, th.Reads.Capacity = true, 5
	if err := c.SetThrottle(ctx, th); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Throttle(ctx); err != nil || !got.Enabled || got.Reads.Capacity != 5 {
		t.Errorf("throttle = %+v %v", got, err)
	}

	f, err := c.AddFault(ctx, middleware.Fault{Kind: middleware.FaultConflict})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddFault(ctx, middleware.Fault{Kind: "nonsense"}); err == nil {
		t.Error("bad fault accepted")
	}
	if err := c.RemoveFault(ctx, f.ID); err != nil {
		t.Fatal(err)
	}
	var apiErr *client.APIError
	if err := c.RemoveFault(ctx, f.ID); err == nil || !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound {
		t.Errorf("removing twice: %v", err)
	}

	if err := c.SetIMDSDefaultVM(ctx, "vm-x"); err != nil || s.IMDS().DefaultVM() != "vm-x" {
		t.Errorf("imds default: %v %q", err, s.IMDS().DefaultVM())
	}
	if err := c.VMAction(ctx, "/subscriptions/"+sub+"/resourceGroups/rg-a/providers/Microsoft.Compute/virtualMachines/x", "explode"); err == nil {
		t.Error("unknown VM action accepted")
	}

	if err := c.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if vnets, _ := c.List(ctx, "Microsoft.Network/virtualNetworks"); len(vnets) != 0 {
		t.Errorf("reset kept %v", vnets)
	}
	if s.IMDS().DefaultVM() != "" {
		t.Error("reset kept the IMDS default VM")
	}
}

func TestEnvAndEnvironmentFile(t *testing.T) {
	s := start(t, Options{IMDSAddr: "off"})
	env := map[string]string{}
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	if env["AZSIM_URL"] != s.URL() || env["SSL_CERT_FILE"] != s.CABundleFile() || env["AZURE_CLIENT_SECRET"] != DefaultClientSecret ||
		env["AZURE_ENVIRONMENT_FILEPATH"] != s.EnvironmentFile() || env["IDENTITY_ENDPOINT"] != "" {
		t.Errorf("env = %v", env)
	}
	b, err := os.ReadFile(s.EnvironmentFile())
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]string
	if err := json.Unmarshal(b, &doc); err != nil || doc["resourceManagerEndpoint"] != s.URL()+"/" || doc["tokenAudience"] == "" {
		t.Errorf("environment file: %s %v", b, err)
	}
	p := filepath.Join(t.TempDir(), "env")
	if err := s.WriteEnvFile(p); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); !strings.Contains(string(b), "export AZSIM_URL='"+s.URL()+"'\n") {
		t.Errorf("env file:\n%s", b)
	}
}
