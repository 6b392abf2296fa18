package arm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/component-base/metrics/testutil"

	"github.com/azure-ccm/azure-ccm/internal/config"
	waitutil "github.com/azure-ccm/azure-ccm/internal/testutil"
)

type fakeCred struct{}

func (fakeCred) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: "token", ExpiresOn: time.Now().Add(time.Hour)}, nil
}

const lbPath = "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/lb"

// newTestClients builds real SDK clients against an httptest TLS server.
func newTestClients(t *testing.T, h http.Handler) (*Clients, *Metrics) {
	t.Helper()
	m := NewMetrics()
	return newTestClientsWith(t, h, m, &policy.RetryOptions{MaxRetries: 2, RetryDelay: time.Millisecond,
		MaxRetryDelay: 5 * time.Millisecond, StatusCodes: DefaultRetry(nil).StatusCodes}), m
}

// newTestClientsWith builds real SDK clients recording into m, retrying as retry says.
func newTestClientsWith(t *testing.T, h http.Handler, m *Metrics, retry *policy.RetryOptions) *Clients {
	t.Helper()
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	cfg, err := config.Parse([]byte(`{"subscriptionId":"sub","resourceGroup":"rg","location":"eastus","useManagedIdentityExtension":true}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(context.Background(), cfg, Options{
		Credential:  fakeCred{},
		Transport:   srv.Client(),
		Environment: &config.Environment{ResourceManagerEndpoint: srv.URL, TokenAudience: "https://aud/", ActiveDirectoryEndpoint: "https://login.local/"},
		Metrics:     m,
		Retry:       retry,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func lbJSON(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"name":"lb","id":"` + lbPath + `","etag":"W/\"1\"","properties":{}}`))
}

func TestGateHonoursRetryAfterAndBlocksOnlyItsClass(t *testing.T) {
	var reads, writes atomic.Int32
	var throttleNext atomic.Bool
	throttleNext.Store(true)
	c, m := newTestClients(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			reads.Add(1)
			if throttleNext.CompareAndSwap(true, false) {
				w.Header().Set("retry-after-ms", "300")
				w.WriteHeader(http.StatusTooManyRequests)
				_, _ = w.Write([]byte(`{"error":{"code":"SubscriptionRequestsThrottled","message":"slow down"}}`))
				return
			}
		} else {
			writes.Add(1)
		}
		lbJSON(w)
	}))
	lbs := c.Network.NewLoadBalancersClient()
	ctx := context.Background()

	_, err := lbs.Get(ctx, "rg", "lb", nil)
	if !IsThrottled(err) || StatusCode(err) != http.StatusTooManyRequests {
		t.Fatalf("first GET: want 429, got %v", err)
	}
	if reads.Load() != 1 {
		t.Fatalf("429 must not be retried by the SDK: %d reads", reads.Load())
	}
	// A caller whose deadline ends before the gate reopens fails fast, sending nothing.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = lbs.Get(short, "rg", "lb", nil)
	var te *ThrottledError
	if !errors.As(err, &te) || te.Class != ClassRead {
		t.Fatalf("want fail-fast ThrottledError, got %v", err)
	}
	if reads.Load() != 1 {
		t.Fatalf("a request went out while throttled")
	}
	// Writes are gated separately: a PUT goes through now.
	if _, err := lbs.BeginCreateOrUpdate(ctx, "rg", "lb", armnetworkLB(), nil); err != nil {
		t.Fatalf("write blocked by a read throttle: %v", err)
	}
	if writes.Load() != 1 {
		t.Fatalf("writes = %d", writes.Load())
	}
	// A patient caller waits for the gate and then succeeds.
	start := time.Now()
	if _, err := lbs.Get(ctx, "rg", "lb", nil); err != nil {
		t.Fatal(err)
	}
	if reads.Load() != 2 {
		t.Fatalf("reads = %d", reads.Load())
	}
	if time.Since(start) <= 0 {
		t.Fatal("clock")
	}
	if v, _ := testutil.GetCounterMetricValue(m.ThrottleEvents.WithLabelValues("read", "429")); v != 1 {
		t.Errorf("throttle events = %v", v)
	}
	if v, _ := testutil.GetCounterMetricValue(m.ThrottledSecs.WithLabelValues("read")); v <= 0 {
		t.Errorf("throttled seconds not recorded: %v", v)
	}
	if v, _ := testutil.GetCounterMetricValue(m.Requests.WithLabelValues("get", "loadBalancers", "throttled")); v != 1 {
		t.Errorf("throttled request count = %v", v)
	}
	if v, _ := testutil.GetCounterMetricValue(m.Requests.WithLabelValues("get", "loadBalancers", "success")); v != 1 {
		t.Errorf("success request count = %v", v)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		h    map[string]string
		want time.Duration
		ok   bool
	}{
		{map[string]string{"Retry-After": "3"}, 3 * time.Second, true},
		{map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}, 90 * time.Second, true},
		{map[string]string{"retry-after-ms": "250", "Retry-After": "9"}, 250 * time.Millisecond, true},
		{map[string]string{"x-ms-retry-after-ms": "40"}, 40 * time.Millisecond, true},
		{map[string]string{"Retry-After": "soon"}, 0, false},
		{map[string]string{}, 0, false},
	}
	for _, tc := range cases {
		h := http.Header{}
		for k, v := range tc.h {
			h.Set(k, v)
		}
		got, ok := parseRetryAfter(h, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%v: got %v,%v want %v,%v", tc.h, got, ok, tc.want, tc.ok)
		}
	}
}

func TestRetriesServerErrorsBounded(t *testing.T) {
	var n atomic.Int32
	c, m := newTestClients(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	_, err := c.Network.NewLoadBalancersClient().Get(context.Background(), "rg", "lb", nil)
	if StatusCode(err) != http.StatusServiceUnavailable {
		t.Fatalf("got %v", err)
	}
	if n.Load() != 3 { // 1 + MaxRetries(2)
		t.Fatalf("attempts = %d, want 3", n.Load())
	}
	if v, _ := testutil.GetCounterMetricValue(m.Requests.WithLabelValues("get", "loadBalancers", "server_error")); v != 3 {
		t.Errorf("server_error count = %v", v)
	}
	// 404 is not retried.
	n.Store(0)
	c2, _ := newTestClients(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.WriteHeader(http.StatusNotFound)
	}))
	_, err = c2.Network.NewLoadBalancersClient().Get(context.Background(), "rg", "lb", nil)
	if !IsNotFound(err) || n.Load() != 1 {
		t.Fatalf("404: %v after %d attempts", err, n.Load())
	}
}

func TestIdenticalGetsAreCoalesced(t *testing.T) {
	var n atomic.Int32
	release := make(chan struct{})
	arrived := make(chan struct{}, 16)
	c, m := newTestClients(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		arrived <- struct{}{}
		<-release
		lbJSON(w)
	}))
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	lbs := c.Network.NewLoadBalancersClient()
	const callers = 8
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := lbs.Get(context.Background(), "rg", "lb", nil)
			if err == nil && (resp.Name == nil || *resp.Name != "lb") {
				err = errors.New("bad body")
			}
			errs <- err
		}()
	}
	<-arrived
	waitutil.Eventually(t, "every other caller to join the GET in flight", func() error {
		if v := c.coalescer.joined.Load(); v != callers-1 {
			return fmt.Errorf("%v joined", v)
		}
		return nil
	})
	close(release)
	wg.Wait()
	if v, _ := testutil.GetCounterMetricValue(m.Coalesced.WithLabelValues("loadBalancers")); v != callers-1 {
		t.Errorf("coalesced metric = %v", v)
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n.Load() != 1 {
		t.Fatalf("server saw %d GETs, want 1", n.Load())
	}
}

func TestRegionZones(t *testing.T) {
	c, _ := newTestClients(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/providers/Microsoft.Compute") || r.URL.Query().Get("api-version") != ProvidersAPIVersion {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"namespace":"Microsoft.Compute","resourceTypes":[
		  {"resourceType":"availabilitySets","zoneMappings":[{"location":"East US","zones":["9"]}]},
		  {"resourceType":"virtualMachines","zoneMappings":[{"location":"East US","zones":["1","2","3"]},{"location":"West Europe","zones":["1"]}]}]}`))
	}))
	got, err := c.RegionZones(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got["eastus"], ",") != "1,2,3" || strings.Join(got["westeurope"], ",") != "1" || len(got) != 2 {
		t.Fatalf("got %v", got)
	}
}

func armnetworkLB() armnetwork.LoadBalancer {
	return armnetwork.LoadBalancer{Location: to.Ptr("eastus"), Properties: &armnetwork.LoadBalancerPropertiesFormat{}}
}
