package network

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

const rgPath = "/subscriptions/" + testSub + "/resourceGroups/" + testRG

func put(t testing.TB, h http.Handler, path, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPut, "https://azsim.test"+path+"?api-version=2025-05-01", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer x")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code >= 300 {
		t.Fatalf("PUT %s: %d %s", path, rec.Code, rec.Body.String())
	}
	return rec
}

// scaleFixture: a VNet, a Standard LB with one pool and nodes NICs in it.
func scaleFixture(t testing.TB, nodes int) *arm.Engine {
	e := arm.NewEngine(arm.Config{})
	Register(e)
	req := httptest.NewRequest(http.MethodPut, "https://azsim.test/subscriptions/"+testSub+"/resourcegroups/"+testRG+"?api-version=2021-04-01", strings.NewReader(`{"location":"eastus"}`))
	req.Header.Set("Authorization", "Bearer x")
	e.ServeHTTP(httptest.NewRecorder(), req)
	put(t, e, rgPath+"/providers/Microsoft.Network/virtualNetworks/vnet", `{"location":"eastus","properties":{"addressSpace":{"addressPrefixes":["10.0.0.0/8"]},"subnets":[{"name":"s","properties":{"addressPrefix":"10.240.0.0/16"}}]}}`)
	put(t, e, rgPath+"/providers/Microsoft.Network/loadBalancers/kubernetes", lbJSON(0))
	for i := 0; i < nodes; i++ {
		put(t, e, fmt.Sprintf("%s/providers/Microsoft.Network/networkInterfaces/nic%d", rgPath, i),
			`{"location":"eastus","properties":{"ipConfigurations":[{"name":"ipc","properties":{"subnet":{"id":"`+rgPath+`/providers/Microsoft.Network/virtualNetworks/vnet/subnets/s"},"loadBalancerBackendAddressPools":[{"id":"`+rgPath+`/providers/Microsoft.Network/loadBalancers/kubernetes/backendAddressPools/kubernetes"}]}}]}}`)
	}
	return e
}

// lbJSON renders a Standard LB with n public frontends, each with one rule and probe.
func lbJSON(n int) string {
	lb := rgPath + "/providers/Microsoft.Network/loadBalancers/kubernetes"
	var fes, rules, probes []string
	for i := 0; i < n; i++ {
		fes = append(fes, fmt.Sprintf(`{"name":"fe%d","properties":{"publicIPAddress":{"id":"%s/providers/Microsoft.Network/publicIPAddresses/pip%d"}}}`, i, rgPath, i))
		rules = append(rules, fmt.Sprintf(`{"name":"r%d","properties":{"protocol":"Tcp","frontendPort":80,"backendPort":80,"frontendIPConfiguration":{"id":"%s/frontendIPConfigurations/fe%d"},"backendAddressPool":{"id":"%s/backendAddressPools/kubernetes"},"probe":{"id":"%s/probes/p%d"}}}`, i, lb, i, lb, lb, i))
		probes = append(probes, fmt.Sprintf(`{"name":"p%d","properties":{"protocol":"Tcp","port":%d}}`, i, 30000+i))
	}
	return `{"location":"eastus","sku":{"name":"Standard"},"properties":{"frontendIPConfigurations":[` + strings.Join(fes, ",") +
		`],"backendAddressPools":[{"name":"kubernetes"}],"loadBalancingRules":[` + strings.Join(rules, ",") + `],"probes":[` + strings.Join(probes, ",") + `]}}`
}

func TestRulesPerNICLimit(t *testing.T) {
	e := scaleFixture(t, 2)
	for i := 0; i < MaxRulesPerNIC+1; i++ {
		put(t, e, fmt.Sprintf("%s/providers/Microsoft.Network/publicIPAddresses/pip%d", rgPath, i), `{"location":"eastus","sku":{"name":"Standard"}}`)
	}
	put(t, e, rgPath+"/providers/Microsoft.Network/loadBalancers/kubernetes", lbJSON(MaxRulesPerNIC))
	req := httptest.NewRequest(http.MethodPut, "https://azsim.test"+rgPath+"/providers/Microsoft.Network/loadBalancers/kubernetes?api-version=2025-05-01", strings.NewReader(lbJSON(MaxRulesPerNIC+1)))
	req.Header.Set("Authorization", "Bearer x")
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), "LoadBalancingRuleCountLimitReachedForNic") {
		t.Fatalf("got %d %s", rec.Code, rec.Body.String())
	}
}

// TestConcurrentWriters runs parallel writers (run with -race) and checks
// that every write landed and addresses stayed unique.
func TestConcurrentWriters(t *testing.T) {
	e := scaleFixture(t, 0)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				put(t, e, fmt.Sprintf("%s/providers/Microsoft.Network/publicIPAddresses/w%d-%d", rgPath, w, i), `{"location":"eastus","sku":{"name":"Standard"}}`)
				put(t, e, fmt.Sprintf("%s/providers/Microsoft.Network/networkInterfaces/w%d-%d", rgPath, w, i),
					`{"location":"eastus","properties":{"ipConfigurations":[{"name":"ipc","properties":{"subnet":{"id":"`+rgPath+`/providers/Microsoft.Network/virtualNetworks/vnet/subnets/s"}}}]}}`)
			}
		}(w)
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, typ := range []string{"Microsoft.Network/publicIPAddresses", "Microsoft.Network/networkInterfaces"} {
		docs := e.ListResources(typ)
		if len(docs) != 80 {
			t.Fatalf("%s: %d resources", typ, len(docs))
		}
		for _, b := range docs {
			doc, _ := arm.DecodeDoc(b)
			ip := arm.Str(doc, "properties", "ipAddress")
			if ipcs := arm.Arr(doc, "properties", "ipConfigurations"); len(ipcs) > 0 {
				ip = arm.Str(ipcs[0], "properties", "privateIPAddress")
			}
			if ip == "" || seen[ip] {
				t.Fatalf("address %q missing or duplicated", ip)
			}
			seen[ip] = true
		}
	}
}

// BenchmarkLBUpdate measures a full LB PUT (300 frontends/rules) with 200 NICs
// in its pool: validation, etags and the deriver.
func BenchmarkLBUpdate(b *testing.B) {
	e := scaleFixture(b, 200)
	for i := 0; i < 300; i++ {
		put(b, e, fmt.Sprintf("%s/providers/Microsoft.Network/publicIPAddresses/pip%d", rgPath, i), `{"location":"eastus","sku":{"name":"Standard"}}`)
	}
	body := lbJSON(300)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		put(b, e, rgPath+"/providers/Microsoft.Network/loadBalancers/kubernetes", body)
	}
}

// BenchmarkPIPCreate measures a small write in a large state (the deriver's fixed cost).
func BenchmarkPIPCreate(b *testing.B) {
	e := scaleFixture(b, 200)
	for i := 0; i < 300; i++ {
		put(b, e, fmt.Sprintf("%s/providers/Microsoft.Network/publicIPAddresses/pip%d", rgPath, i), `{"location":"eastus","sku":{"name":"Standard"}}`)
	}
	put(b, e, rgPath+"/providers/Microsoft.Network/loadBalancers/kubernetes", lbJSON(300))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		put(b, e, fmt.Sprintf("%s/providers/Microsoft.Network/publicIPAddresses/x%d", rgPath, i%400), `{"location":"eastus","sku":{"name":"Standard"},"tags":{"i":"`+fmt.Sprint(i)+`"}}`)
	}
}
