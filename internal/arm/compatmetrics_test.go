package arm

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
)

// newCompatTestClients is newTestClients with the metrics in a registry the test gathers.
func newCompatTestClients(t *testing.T, h http.Handler) (*Clients, *Metrics, metrics.KubeRegistry) {
	t.Helper()
	m := newMetrics()
	reg := metrics.NewKubeRegistry()
	for _, c := range m.collectors() {
		reg.MustRegister(c)
	}
	return newTestClientsWith(t, h, m, &policy.RetryOptions{MaxRetries: -1}), m, reg
}

// labelNames returns the label names of every series of family name in reg.
func labelNames(t *testing.T, reg metrics.KubeRegistry, name string) [][]string {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var names []string
			for _, l := range m.GetLabel() {
				names = append(names, l.GetName())
			}
			slices.Sort(names)
			out = append(out, names)
		}
	}
	return out
}

func TestCompatAPIMetrics(t *testing.T) {
	var mode atomic.Int32 // 0: answer, 1: 404, 2: 429, 3: answer with the read bucket at the reserve
	var sent atomic.Int32
	c, m, reg := newCompatTestClients(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent.Add(1)
		switch mode.Load() {
		case 1:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":{"code":"ResourceNotFound","message":"gone"}}`))
			return
		case 2:
			w.Header().Set("retry-after-ms", "300")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"error":{"code":"SubscriptionRequestsThrottled","message":"slow down"}}`))
			return
		case 3:
			w.Header().Set("x-ms-ratelimit-remaining-subscription-reads", "2")
		}
		lbJSON(w)
	}))
	lbs := c.Network.NewLoadBalancersClient()
	ctx := context.Background()
	lv := []string{"load_balancers_get", "rg", "sub", ""}
	count := func() uint64 {
		t.Helper()
		n, err := testutil.GetHistogramMetricCount(m.APILatency.WithLabelValues(lv...))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	counter := func(c *metrics.CounterVec, lv ...string) float64 {
		t.Helper()
		v, err := testutil.GetCounterMetricValue(c.WithLabelValues(lv...))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	// One request: one observation, no error.
	if _, err := lbs.Get(ctx, "RG", "lb", nil); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Fatalf("api_request_duration_seconds count = %d after one request, want 1", n)
	}
	if got := labelNames(t, reg, "cloudprovider_azure_api_request_duration_seconds"); len(got) != 1 ||
		!slices.Equal(got[0], []string{"request", "resource_group", "source", "subscription_id"}) {
		t.Fatalf("api_request_duration_seconds labels = %v", got)
	}

	// A failure is counted with ARM's error code.
	mode.Store(1)
	if _, err := lbs.Get(ctx, "rg", "lb", nil); StatusCode(err) != http.StatusNotFound {
		t.Fatalf("want 404, got %v", err)
	}
	if v := counter(m.APIErrors, append(lv, "ResourceNotFound")...); v != 1 {
		t.Fatalf("api_request_errors{code=ResourceNotFound} = %v, want 1", v)
	}
	if got := labelNames(t, reg, "cloudprovider_azure_api_request_errors"); len(got) != 1 ||
		!slices.Equal(got[0], []string{"code", "request", "resource_group", "source", "subscription_id"}) {
		t.Fatalf("api_request_errors labels = %v", got)
	}

	// A 429 is an error (ARM sent it); the requests held while its Retry-After lasts are
	// throttled: one refused at once (its deadline is sooner), one held and then sent.
	mode.Store(2)
	if _, err := lbs.Get(ctx, "rg", "lb", nil); !IsThrottled(err) {
		t.Fatalf("want 429, got %v", err)
	}
	if v := counter(m.APIErrors, append(lv, "SubscriptionRequestsThrottled")...); v != 1 {
		t.Fatalf("api_request_errors{code=SubscriptionRequestsThrottled} = %v, want 1", v)
	}
	if v := counter(m.APIThrottled, lv...); v != 0 {
		t.Fatalf("api_request_throttled_count = %v before any request met the closed gate", v)
	}
	mode.Store(0)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	var te *ThrottledError
	if _, err := lbs.Get(short, "rg", "lb", nil); !errors.As(err, &te) {
		t.Fatalf("want the gate's refusal, got %v", err)
	}
	if _, err := lbs.Get(ctx, "rg", "lb", nil); err != nil {
		t.Fatal(err)
	}
	if v := counter(m.APIThrottled, lv...); v != 2 {
		t.Fatalf("api_request_throttled_count = %v, want 2", v)
	}
	if v := counter(m.APIRateLimited, lv...); v != 0 {
		t.Fatalf("api_request_ratelimited_count = %v after a 429 only", v)
	}
	// Sent: the first, the 404, the 429 and the held one. The refused request was never sent
	// and is not observed.
	if n, s := count(), sent.Load(); n != 4 || s != 4 {
		t.Fatalf("observations = %d, requests sent = %d, want 4 and 4", n, s)
	}

	// The client's own pacing: the read bucket reported at the reserve holds the next read.
	mode.Store(3)
	if _, err := lbs.Get(ctx, "rg", "lb", nil); err != nil {
		t.Fatal(err)
	}
	short2, cancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel2()
	if _, err := lbs.Get(short2, "rg", "lb", nil); !errors.As(err, &te) {
		t.Fatalf("want the gate's refusal at the reserve, got %v", err)
	}
	if v := counter(m.APIRateLimited, lv...); v != 1 {
		t.Fatalf("api_request_ratelimited_count = %v, want 1", v)
	}
	if v := counter(m.APIThrottled, lv...); v != 2 {
		t.Fatalf("api_request_throttled_count = %v, want still 2", v)
	}
}

func TestCompatRequestName(t *testing.T) {
	for _, tc := range []struct{ method, path, want string }{
		{"GET", "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/lb", "load_balancers_get"},
		{"GET", "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/loadBalancers", "load_balancers_list"},
		{"PUT", "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/publicIPAddresses/p", "public_ip_addresses_create_or_update"},
		{"DELETE", "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/routeTables/rt", "route_tables_delete"},
		{"GET", "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm", "vm_get"},
		{"GET", "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/ss/virtualMachines", "vmssvm_list"},
		{"PATCH", "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/ss", "vmss_update"},
		{"POST", "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/ss/delete", "vmss_delete"},
		{"GET", "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/lb/backendAddressPools/p", "load_balancers_backend_address_pools_get"},
		{"GET", "/subscriptions/s/locations", "locations_list"},
	} {
		if got := compatRequestName(tc.method, splitPath(tc.path)); got != tc.want {
			t.Errorf("%s %s: %q, want %q", tc.method, tc.path, got, tc.want)
		}
	}
}
