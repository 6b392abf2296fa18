package azstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azarm "github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/armjson"
	"github.com/azure-ccm/azure-ccm/internal/azsim/server"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	"github.com/azure-ccm/azure-ccm/internal/azureid"
	"github.com/azure-ccm/azure-ccm/internal/writer"
)

const rawRG = "rg-raw"

// sent is one request as it left the pipeline.
type sent struct {
	method, path, query string
	header              http.Header
	body                []byte
}

// recorder is a transport that keeps the load balancer requests it forwards.
type recorder struct {
	next *http.Client
	mu   sync.Mutex
	reqs []sent
}

func (r *recorder) Do(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	if bytes.Contains([]byte(req.URL.Path), []byte("/loadBalancers/")) || bytes.Contains([]byte(req.URL.Path), []byte("/networkSecurityGroups/")) {
		r.mu.Lock()
		r.reqs = append(r.reqs, sent{req.Method, req.URL.Path, req.URL.RawQuery, req.Header.Clone(), body})
		r.mu.Unlock()
	}
	return r.next.Do(req)
}

func (r *recorder) take() []sent {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.reqs
	r.reqs = nil
	return out
}

type rawEnv struct {
	sdk    *LoadBalancer // SDK clients only
	raw    *LoadBalancer // the same load balancer through RawClient
	sdkNSG *SecurityGroup
	rawNSG *SecurityGroup
	rec    *recorder
}

func newRawEnv(t *testing.T, name string) *rawEnv {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.Start(ctx, server.Options{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = srv.Close() })
	if _, err := srv.Seed(ctx, &topology.Topology{ResourceGroups: []string{rawRG},
		VirtualNetworks: []topology.VirtualNetwork{{ResourceGroup: rawRG, Name: "vnet", AddressPrefixes: []string{"10.0.0.0/8"},
			Subnets: []topology.Subnet{{Name: "subnet", AddressPrefix: "10.0.0.0/16"}}}},
		NetworkSecurityGroups: []topology.Named{{ResourceGroup: rawRG, Name: "nsg"}}}); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{next: srv.HTTPClient()}
	opts := azcore.ClientOptions{
		Cloud: cloud.Configuration{
			ActiveDirectoryAuthorityHost: srv.URL() + "/",
			Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
				cloud.ResourceManager: {Endpoint: srv.URL(), Audience: "https://management.azure.com/"},
			},
		},
		Transport: rec,
	}
	cred, err := azidentity.NewClientSecretCredential(server.DefaultTenantID, server.DefaultClientID, server.DefaultClientSecret,
		&azidentity.ClientSecretCredentialOptions{ClientOptions: opts, DisableInstanceDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	f, err := armnetwork.NewClientFactory(topology.DefaultSubscriptionID, cred, &azarm.ClientOptions{ClientOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := azarm.NewClient("azure-ccm", "v1.0.0", cred, &azarm.ClientOptions{ClientOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	id := azureid.LoadBalancer(topology.DefaultSubscriptionID, rawRG, name)
	base := LoadBalancer{Client: f.NewLoadBalancersClient(), Pools: f.NewLoadBalancerBackendAddressPoolsClient(),
		ResourceGroup: rawRG, Name: name, PollFrequency: 10 * time.Millisecond}
	raw := base
	rc := NewRawClient(pl, armjson.New())
	raw.Raw, raw.ID = rc, id
	nsg := SecurityGroup{Client: f.NewSecurityGroupsClient(), ResourceGroup: rawRG, Name: "nsg", PollFrequency: 10 * time.Millisecond}
	rawNSG := nsg
	rawNSG.Raw, rawNSG.ID = rc, azureid.SecurityGroup(topology.DefaultSubscriptionID, rawRG, "nsg")
	return &rawEnv{sdk: &base, raw: &raw, sdkNSG: &nsg, rawNSG: &rawNSG, rec: rec}
}

func testLB(addresses int) *armnetwork.LoadBalancer {
	pool := &armnetwork.BackendAddressPool{Name: to.Ptr("kubernetes"), Properties: &armnetwork.BackendAddressPoolPropertiesFormat{}}
	for i := range addresses {
		pool.Properties.LoadBalancerBackendAddresses = append(pool.Properties.LoadBalancerBackendAddresses, &armnetwork.LoadBalancerBackendAddress{
			Name: to.Ptr(fmt.Sprintf("node-%d", i)),
			Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{IPAddress: to.Ptr(fmt.Sprintf("10.0.%d.%d", i/250, 1+i%250)),
				VirtualNetwork: &armnetwork.SubResource{ID: to.Ptr("/subscriptions/" + topology.DefaultSubscriptionID + "/resourceGroups/" + rawRG + "/providers/Microsoft.Network/virtualNetworks/vnet")}}})
	}
	return &armnetwork.LoadBalancer{Location: to.Ptr("eastus"), Tags: map[string]*string{"a<b": to.Ptr("x&y")},
		SKU:        &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{BackendAddressPools: []*armnetwork.BackendAddressPool{pool}}}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// normalize replaces what each azsim instance makes up (ETags, resource GUIDs).
func normalize(body []byte) []byte {
	body = etagRE.ReplaceAll(body, []byte(`W/\"etag\"`))
	return guidRE.ReplaceAll(body, []byte(`"resourceGuid":"guid"`))
}

var (
	etagRE = regexp.MustCompile(`W/\\"[0-9a-f-]+\\"`)
	guidRE = regexp.MustCompile(`"resourceGuid":"[0-9a-f-]+"`)
)

// The raw client sends what the SDK's client sends: same method, path, api-version, Accept,
// Content-Type, If-Match and body bytes, for the first PUT, a conditional PUT and a GET.
func TestRawClientSpeaksLikeTheSDK(t *testing.T) {
	ctx := ctxT(t)
	var runs [2][]sent
	for i, store := range []func(e *rawEnv) *LoadBalancer{func(e *rawEnv) *LoadBalancer { return e.sdk }, func(e *rawEnv) *LoadBalancer { return e.raw }} {
		e := newRawEnv(t, "lb")
		s := store(e)
		_, etag, err := s.Put(ctx, testLB(3), "")
		if err != nil {
			t.Fatal(err)
		}
		runs[i] = append(runs[i], e.rec.take()[0]) // the PUT; polls and the final GET follow
		next := testLB(4)
		if _, _, err := s.Put(ctx, next, etag); err != nil {
			t.Fatal(err)
		}
		runs[i] = append(runs[i], e.rec.take()[0])
		if _, _, err := s.Get(ctx); err != nil {
			t.Fatal(err)
		}
		runs[i] = append(runs[i], e.rec.take()...)
		// A backend pool alone, with the load balancer's ETag.
		lb, lbETag, err := s.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		e.rec.take()
		lb.Properties.BackendAddressPools[0].Properties.LoadBalancerBackendAddresses = lb.Properties.BackendAddressPools[0].Properties.LoadBalancerBackendAddresses[:2]
		if _, err := s.PutChild(ctx, lb, "kubernetes", lbETag); err != nil {
			t.Fatal(err)
		}
		runs[i] = append(runs[i], e.rec.take()[0])
		// The NSG: a read, and a write of a rule with the ETag read.
		nsg := e.sdkNSG
		if i == 1 {
			nsg = e.rawNSG
		}
		sg, sgETag, err := nsg.Get(ctx)
		if err != nil || sg == nil {
			t.Fatalf("NSG: %v %v", sg, err)
		}
		sg.Properties.SecurityRules = append(sg.Properties.SecurityRules, &armnetwork.SecurityRule{Name: to.Ptr("allow-80"),
			Properties: &armnetwork.SecurityRulePropertiesFormat{Protocol: to.Ptr(armnetwork.SecurityRuleProtocolTCP), Access: to.Ptr(armnetwork.SecurityRuleAccessAllow),
				Direction: to.Ptr(armnetwork.SecurityRuleDirectionInbound), Priority: to.Ptr[int32](500), SourceAddressPrefix: to.Ptr("Internet"),
				SourcePortRange: to.Ptr("*"), DestinationAddressPrefix: to.Ptr("10.0.0.4"), DestinationPortRange: to.Ptr("80")}})
		if _, _, err := nsg.Put(ctx, sg, sgETag); err != nil {
			t.Fatal(err)
		}
		runs[i] = append(runs[i], e.rec.take()[:2]...) // the GET and the PUT
	}
	sdk, raw := runs[0], runs[1]
	if len(sdk) != len(raw) {
		t.Fatalf("the SDK sent %d requests, the raw client %d", len(sdk), len(raw))
	}
	for i := range sdk {
		a, b := sdk[i], raw[i]
		if a.method != b.method || a.path != b.path || a.query != b.query {
			t.Errorf("request %d: SDK %s %s?%s, raw %s %s?%s", i, a.method, a.path, a.query, b.method, b.path, b.query)
		}
		for _, h := range []string{"Accept", "Content-Type"} {
			if a.header.Get(h) != b.header.Get(h) {
				t.Errorf("request %d: %s: SDK %q, raw %q", i, h, a.header.Get(h), b.header.Get(h))
			}
		}
		// Each azsim makes up its own ETags; a wrong one would have failed the write with 412.
		if sdkIf, rawIf := a.header.Get("If-Match"), b.header.Get("If-Match"); (sdkIf == "") != (rawIf == "") {
			t.Errorf("request %d: If-Match: SDK %q, raw %q", i, sdkIf, rawIf)
		}
		if !bytes.Equal(normalize(a.body), normalize(b.body)) {
			t.Errorf("request %d: bodies differ:\n SDK %s\n raw %s", i, a.body, b.body)
		}
	}
	if sdk[0].query != "api-version="+NetworkAPIVersion {
		t.Errorf("the SDK's load balancer api-version is %q: update NetworkAPIVersion", sdk[0].query)
	}
}

// Through a writer: the raw store reads what the SDK reads, a stale ETag is refused with the
// 412 the writer re-reads on, and an absent load balancer reads as nil.
func TestRawStoreUnderWriter(t *testing.T) {
	ctx := ctxT(t)
	e := newRawEnv(t, "lb")
	if lb, etag, err := e.raw.Get(ctx); lb != nil || etag != "" || err != nil {
		t.Fatalf("absent load balancer: %v %q %v", lb, etag, err)
	}
	w := writer.New[armnetwork.LoadBalancer](e.raw, writer.Options[armnetwork.LoadBalancer]{})
	stored, err := w.Submit(ctx, func(cur *armnetwork.LoadBalancer) (*armnetwork.LoadBalancer, error) {
		if cur != nil {
			return nil, errors.New("expected no load balancer")
		}
		return testLB(300), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sdkLB, sdkETag, err := e.sdk.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rawLB, rawETag, err := e.raw.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sdkETag != rawETag || !reflect.DeepEqual(sdkLB, rawLB) || !reflect.DeepEqual(sdkLB, stored) {
		t.Fatalf("the raw store's documents differ from the SDK's (ETags %q, %q)", sdkETag, rawETag)
	}
	if n := len(rawLB.Properties.BackendAddressPools[0].Properties.LoadBalancerBackendAddresses); n != 300 {
		t.Fatalf("%d addresses, want 300", n)
	}
	// Someone else writes: the raw PUT with the old ETag is refused with 412.
	other := testLB(1)
	if _, _, err := e.sdk.Put(ctx, other, sdkETag); err != nil {
		t.Fatal(err)
	}
	_, _, err = e.raw.Put(ctx, testLB(2), rawETag)
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusPreconditionFailed {
		t.Fatalf("stale PUT: %v, want a 412", err)
	}
	// The writer recovers from it as from the SDK's (re-read, re-apply).
	if _, err := w.Submit(ctx, func(cur *armnetwork.LoadBalancer) (*armnetwork.LoadBalancer, error) {
		cur.Tags["touched"] = to.Ptr("yes")
		return cur, nil
	}); err != nil {
		t.Fatal(err)
	}
	final, _, _ := e.sdk.Get(ctx)
	if final.Tags["touched"] == nil || len(final.Properties.BackendAddressPools[0].Properties.LoadBalancerBackendAddresses) != 1 {
		t.Fatalf("after the 412 the writer did not re-read and re-apply: %+v", final.Tags)
	}
}
