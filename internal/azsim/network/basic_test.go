package network

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

func respErr(t *testing.T, err error) *azcore.ResponseError {
	t.Helper()
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("expected ResponseError, got %v", err)
	}
	return re
}

func vnetBody(prefix string, subnets ...string) armnetwork.VirtualNetwork {
	v := armnetwork.VirtualNetwork{Location: ptr(testLoc), Properties: &armnetwork.VirtualNetworkPropertiesFormat{
		AddressSpace: &armnetwork.AddressSpace{AddressPrefixes: []*string{ptr(prefix)}},
	}}
	for i := 0; i+1 < len(subnets); i += 2 {
		v.Properties.Subnets = append(v.Properties.Subnets, &armnetwork.Subnet{Name: ptr(subnets[i]),
			Properties: &armnetwork.SubnetPropertiesFormat{AddressPrefix: ptr(subnets[i+1])}})
	}
	return v
}

func TestResourceGroupAndVNetCRUD(t *testing.T) {
	v := newEnv(t, arm.Config{})
	v.mustRG(testRG)
	vnets := v.net.NewVirtualNetworksClient()
	// Resource under a missing group.
	_, err := vnets.BeginCreateOrUpdate(v.ctx, "nope", "vnet", vnetBody("10.0.0.0/16"), nil)
	if re := respErr(t, err); re.StatusCode != 404 || re.ErrorCode != "ResourceGroupNotFound" {
		t.Fatalf("got %d %s", re.StatusCode, re.ErrorCode)
	}
	p, err := vnets.BeginCreateOrUpdate(v.ctx, "RG1", "vnet", vnetBody("10.0.0.0/16", "s1", "10.0.1.0/24"), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.PollUntilDone(v.ctx, fastPoll)
	if err != nil {
		t.Fatal(err)
	}
	if got := *res.ID; got != "/subscriptions/"+testSub+"/resourceGroups/rg1/providers/Microsoft.Network/virtualNetworks/vnet" {
		t.Fatalf("id %s", got)
	}
	if *res.Properties.ProvisioningState != armnetwork.ProvisioningStateSucceeded || res.Etag == nil || !strings.HasPrefix(*res.Etag, `W/"`) {
		t.Fatalf("state/etag %v %v", *res.Properties.ProvisioningState, res.Etag)
	}
	sn := res.Properties.Subnets[0]
	if *sn.Type != "Microsoft.Network/virtualNetworks/subnets" || *sn.Etag != *res.Etag || !strings.HasSuffix(*sn.ID, "/subnets/s1") {
		t.Fatalf("subnet fields %v %v %v", *sn.Type, *sn.Etag, *sn.ID)
	}
	// Child API: add a subnet, see it inline and with a new parent etag.
	sp, err := v.net.NewSubnetsClient().BeginCreateOrUpdate(v.ctx, testRG, "VNET", "s2",
		armnetwork.Subnet{Properties: &armnetwork.SubnetPropertiesFormat{AddressPrefix: ptr("10.0.2.0/24")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := sp.PollUntilDone(v.ctx, fastPoll)
	if err != nil {
		t.Fatal(err)
	}
	got, err := vnets.Get(v.ctx, testRG, "vnet", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Properties.Subnets) != 2 || *got.Etag == *res.Etag || *s2.Etag != *got.Etag {
		t.Fatalf("subnets %d etag %s/%s child %s", len(got.Properties.Subnets), *got.Etag, *res.Etag, *s2.Etag)
	}
	// Overlapping subnet is rejected.
	_, err = v.net.NewSubnetsClient().BeginCreateOrUpdate(v.ctx, testRG, "vnet", "s3",
		armnetwork.Subnet{Properties: &armnetwork.SubnetPropertiesFormat{AddressPrefix: ptr("10.0.2.128/25")}}, nil)
	if re := respErr(t, err); re.ErrorCode != "NetcfgSubnetRangesOverlap" {
		t.Fatalf("got %s", re.ErrorCode)
	}
	// Missing child → NotFound.
	_, err = v.net.NewSubnetsClient().Get(v.ctx, testRG, "vnet", "zzz", nil)
	if re := respErr(t, err); re.StatusCode != 404 || re.ErrorCode != "NotFound" {
		t.Fatalf("got %d %s", re.StatusCode, re.ErrorCode)
	}
	// Delete child, then the vnet, then the group.
	dp, err := v.net.NewSubnetsClient().BeginDelete(v.ctx, testRG, "vnet", "s2", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dp.PollUntilDone(v.ctx, fastPoll); err != nil {
		t.Fatal(err)
	}
	dv, err := vnets.BeginDelete(v.ctx, testRG, "vnet", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dv.PollUntilDone(v.ctx, fastPoll); err != nil {
		t.Fatal(err)
	}
	_, err = vnets.Get(v.ctx, testRG, "vnet", nil)
	if re := respErr(t, err); re.StatusCode != 404 || re.ErrorCode != "ResourceNotFound" {
		t.Fatalf("got %d %s", re.StatusCode, re.ErrorCode)
	}
	rp, err := v.rgs.BeginDelete(v.ctx, testRG, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rp.PollUntilDone(v.ctx, fastPoll); err != nil {
		t.Fatal(err)
	}
	if _, err := v.rgs.Get(v.ctx, testRG, nil); respErr(t, err).ErrorCode != "ResourceGroupNotFound" {
		t.Fatal("group still there")
	}
}

func TestProtocolErrors(t *testing.T) {
	v := newEnv(t, arm.Config{})
	v.mustRG(testRG)
	base := "/subscriptions/" + testSub + "/resourceGroups/" + testRG + "/providers/Microsoft.Network/virtualNetworks/v1"
	cases := []struct {
		name, method, path, body string
		hdr                      map[string]string
		status                   int
		code                     string
	}{
		{"no api-version", "GET", base, "", nil, 400, "MissingApiVersionParameter"},
		{"bad api-version", "GET", base + "?api-version=2099-01-01", "", nil, 400, "NoRegisteredProviderFound"},
		{"unknown type", "GET", strings.Replace(base, "virtualNetworks", "fooBars", 1) + "?api-version=2025-05-01", "", nil, 400, "InvalidResourceType"},
		{"unknown namespace", "GET", strings.Replace(base, "Microsoft.Network", "Microsoft.Nope", 1) + "?api-version=2025-05-01", "", nil, 400, "InvalidResourceNamespace"},
		{"malformed json", "PUT", base + "?api-version=2025-05-01", `{"location":`, nil, 400, "InvalidRequestContent"},
		{"wrong json type", "PUT", base + "?api-version=2025-05-01", `{"location":"eastus","properties":{"addressSpace":{"addressPrefixes":"x"}}}`, nil, 400, "InvalidRequestFormat"},
		{"bad name", "PUT", strings.Replace(base, "/v1", "/bad*name", 1) + "?api-version=2025-05-01", `{"location":"eastus"}`, nil, 400, "InvalidResourceName"},
		{"no location", "PUT", base + "?api-version=2025-05-01", `{"properties":{}}`, nil, 400, "LocationRequired"},
		{"missing get", "GET", base + "?api-version=2025-05-01", "", nil, 404, "ResourceNotFound"},
		{"if-match on missing", "PUT", base + "?api-version=2025-05-01", `{"location":"eastus","properties":{"addressSpace":{"addressPrefixes":["10.0.0.0/16"]}}}`, map[string]string{"If-Match": `W/"x"`}, 412, "PreconditionFailed"},
		{"rg api-version", "GET", "/subscriptions/" + testSub + "/resourcegroups/" + testRG + "?api-version=1999-01-01", "", nil, 400, "InvalidApiVersionParameter"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := v.raw(c.method, c.path, c.body, c.hdr)
			b, _ := io.ReadAll(resp.Body)
			var eb struct {
				Error struct{ Code, Message string }
			}
			_ = json.Unmarshal(b, &eb)
			if resp.StatusCode != c.status || eb.Error.Code != c.code || eb.Error.Message == "" {
				t.Fatalf("got %d %s", resp.StatusCode, b)
			}
			if resp.Header.Get("x-ms-request-id") == "" {
				t.Fatal("no x-ms-request-id")
			}
		})
	}
	// Missing credentials → 401.
	req, _ := http.NewRequest("GET", v.srv.URL+base+"?api-version=2025-05-01", nil)
	resp, err := v.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("unauthenticated: %d", resp.StatusCode)
	}
	// Body over the limit → 413.
	big := `{"location":"eastus","tags":{"a":"` + strings.Repeat("x", 5<<20) + `"}}`
	if r := v.raw("PUT", base+"?api-version=2025-05-01", big, nil); r.StatusCode != 413 {
		t.Fatalf("big body: %d", r.StatusCode)
	}
	// DELETE of a missing resource → 204.
	if r := v.raw("DELETE", base+"?api-version=2025-05-01", "", nil); r.StatusCode != 204 {
		t.Fatalf("delete missing: %d", r.StatusCode)
	}
	// Client request id echoed.
	if r := v.raw("GET", base+"?api-version=2025-05-01", "", map[string]string{"x-ms-client-request-id": "abc"}); r.Header.Get("x-ms-client-request-id") != "abc" {
		t.Fatal("client request id not echoed")
	}
}
