package network

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azarm "github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v3"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

const (
	testSub = "00000000-0000-0000-0000-000000000001"
	testRG  = "rg1"
	testLoc = "eastus"
)

type fakeCred struct{}

func (fakeCred) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: "test-token", ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// env is an engine behind a TLS test server plus SDK clients pointed at it.
type env struct {
	t      *testing.T
	engine *arm.Engine
	srv    *httptest.Server
	opts   *azarm.ClientOptions
	net    *armnetwork.ClientFactory
	rgs    *armresources.ResourceGroupsClient
	ctx    context.Context
}

func newEnv(t *testing.T, cfg arm.Config) *env {
	t.Helper()
	e := arm.NewEngine(cfg)
	Register(e)
	srv := httptest.NewTLSServer(e)
	t.Cleanup(srv.Close)
	opts := &azarm.ClientOptions{ClientOptions: policy.ClientOptions{
		Cloud: cloud.Configuration{Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
			cloud.ResourceManager: {Endpoint: srv.URL, Audience: "https://management.azure.com/"},
		}},
		Transport: srv.Client(),
		Retry:     policy.RetryOptions{MaxRetries: -1},
	}}
	nf, err := armnetwork.NewClientFactory(testSub, fakeCred{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	rgs, err := armresources.NewResourceGroupsClient(testSub, fakeCred{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return &env{t: t, engine: e, srv: srv, opts: opts, net: nf, rgs: rgs, ctx: ctx}
}

func ptr[T any](v T) *T { return &v }

// fastPoll polls quickly; azcore allows sub-second frequencies under `go test`.
var fastPoll = &runtime.PollUntilDoneOptions{Frequency: 20 * time.Millisecond}

func (v *env) mustRG(name string) {
	v.t.Helper()
	if _, err := v.rgs.CreateOrUpdate(v.ctx, name, armresources.ResourceGroup{Location: ptr(testLoc)}, nil); err != nil {
		v.t.Fatalf("create rg: %v", err)
	}
}

// raw sends a request with a bearer token and returns the response.
func (v *env) raw(method, path, body string, hdr map[string]string) *http.Response {
	v.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, v.srv.URL+path, rd)
	if err != nil {
		v.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer x")
	req.Header.Set("Content-Type", "application/json")
	for k, val := range hdr {
		req.Header.Set(k, val)
	}
	resp, err := v.srv.Client().Do(req)
	if err != nil {
		v.t.Fatal(err)
	}
	v.t.Cleanup(func() { resp.Body.Close() })
	return resp
}
