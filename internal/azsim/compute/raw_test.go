package compute

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// TestRawWire checks wire details the SDK hides: status codes, error codes,
// polling headers and the CCM's exact partial instance body.
func TestRawWire(t *testing.T) {
	v := newEnv(t, arm.Config{})
	v.putScaleSet("ss", v.scaleSet(1, []string{"1"}, false), nil)
	srv := httptest.NewTLSServer(v.engine)
	t.Cleanup(srv.Close)
	base := "/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.Compute/virtualMachineScaleSets/ss"
	do := func(method, path, body string, hdr ...string) (*http.Response, map[string]any) {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, srv.URL+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer x")
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var out map[string]any
		_ = json.Unmarshal(raw, &out)
		return resp, out
	}
	code := func(body map[string]any) string { return arm.Str(body, "error", "code") }
	const v7 = "?api-version=2025-04-01"

	// Every api-version ARM serves for a type is accepted (older clients), others are refused.
	for _, ver := range []string{"2024-07-01", "2017-03-30", "2016-04-30-preview", "2026-04-01"} {
		if resp, body := do(http.MethodGet, base+"?api-version="+ver, ""); resp.StatusCode != 200 {
			t.Errorf("GET scale set with api-version %s: %d %v", ver, resp.StatusCode, body)
		}
	}
	if resp, body := do(http.MethodGet, base+"?api-version=2024-07-02", ""); resp.StatusCode != 400 || code(body) != "NoRegisteredProviderFound" {
		t.Errorf("unknown api-version: %d %v", resp.StatusCode, body)
	}
	netBase := "/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.Network/"
	for _, c := range []struct {
		path, ver string
		ok        bool
	}{
		{"natGateways/none", "2019-02-01", true}, {"natGateways/none", "2018-12-01", false},
		{"publicIPPrefixes/none", "2018-07-01", true}, {"publicIPPrefixes/none", "2018-06-01", false},
		{"serviceGateways/none", "2025-05-01", true}, {"serviceGateways/none", "2025-03-01", false},
		{"loadBalancers/none", "2015-06-15", true}, {"loadBalancers/none", "2019-06-01", true},
	} {
		resp, body := do(http.MethodGet, netBase+c.path+"?api-version="+c.ver, "")
		if got := resp.StatusCode == http.StatusNotFound; got != c.ok || (!c.ok && code(body) != "NoRegisteredProviderFound") {
			t.Errorf("GET %s api-version %s: %d %v (want served: %v)", c.path, c.ver, resp.StatusCode, body, c.ok)
		}
	}

	resp, body := do(http.MethodGet, base+"/virtualMachines/x"+v7, "")
	if resp.StatusCode != 400 || code(body) != "InvalidParameter" || arm.Str(body, "error", "target") != "instanceId" {
		t.Errorf("non-numeric instance: %d %v", resp.StatusCode, body)
	}
	resp, body = do(http.MethodGet, strings.Replace(base, rg, "nope", 1)+"/virtualMachines"+v7, "")
	if resp.StatusCode != 404 || code(body) != "ResourceGroupNotFound" {
		t.Errorf("list in missing group: %d %v", resp.StatusCode, body)
	}
	resp, body = do(http.MethodGet, base+"x/virtualMachines"+v7, "")
	if resp.StatusCode != 404 || code(body) != "ResourceNotFound" {
		t.Errorf("list of missing scale set: %d %v", resp.StatusCode, body)
	}
	resp, _ = do(http.MethodGet, base+"/virtualMachines/0", "")
	if resp.StatusCode != 400 {
		t.Errorf("missing api-version: %d", resp.StatusCode)
	}
	resp, body = do(http.MethodPut, base+"/virtualMachines/7"+v7, `{"location":"eastus"}`)
	if resp.StatusCode != 404 {
		t.Errorf("PUT of a missing instance: %d %v", resp.StatusCode, body)
	}

	// The CCM's partial body, If-Match with the current etag.
	resp, inst := do(http.MethodGet, base+"/virtualMachines/0"+v7, "")
	etag := resp.Header.Get("ETag")
	if etag != `"1"` || inst["etag"] != etag {
		t.Fatalf("instance etag header %q body %v", etag, inst["etag"])
	}
	same := `{"location":"eastus","etag":` + jsonString(etag) + `,"properties":{"hardwareProfile":{"vmSize":"Standard_D2s_v3"},
	 "networkProfileConfiguration":{"networkInterfaceConfigurations":[{"name":"nic","properties":{"primary":true,"ipConfigurations":[
	  {"name":"ipconfig1","properties":{"primary":true,"subnet":{"id":"` + v.subnet + `"}}}]}}]}}}`
	// A write that changes nothing (or only tags) keeps the etag, as CRP does.
	resp, _ = do(http.MethodPut, base+"/virtualMachines/0"+v7, same, "If-Match", etag)
	if resp.StatusCode != 200 || resp.Header.Get("ETag") != etag {
		t.Errorf("unchanged instance PUT: %d etag %q, want %q", resp.StatusCode, resp.Header.Get("ETag"), etag)
	}
	partial := strings.Replace(same, `"primary":true,"ipConfigurations"`, `"primary":true,"dnsSettings":{"dnsServers":["10.0.0.10"]},"ipConfigurations"`, 1)
	resp, out := do(http.MethodPut, base+"/virtualMachines/0"+v7, partial, "If-Match", etag)
	if resp.StatusCode != 200 || resp.Header.Get("Azure-AsyncOperation") == "" || resp.Header.Get("ETag") != `"2"` {
		t.Errorf("instance PUT: %d headers %v", resp.StatusCode, resp.Header)
	}
	if arm.Str(out, "properties", "osProfile", "computerName") != "aks-pool-vmss000000" || arm.Str(out, "properties", "storageProfile", "osDisk", "name") == "" {
		t.Errorf("partial PUT lost unmentioned fields: %v", out["properties"])
	}
	resp, body = do(http.MethodPut, base+"/virtualMachines/0"+v7, partial, "If-Match", etag)
	if resp.StatusCode != 412 || code(body) != "PreconditionFailed" {
		t.Errorf("stale If-Match: %d %v", resp.StatusCode, body)
	}

	// Power actions answer 202 with both polling headers.
	resp, _ = do(http.MethodPost, base+"/virtualMachines/0/powerOff"+v7, "")
	if resp.StatusCode != 202 || resp.Header.Get("Azure-AsyncOperation") == "" || resp.Header.Get("Location") == "" {
		t.Errorf("powerOff: %d %v", resp.StatusCode, resp.Header)
	}
	_, iv := do(http.MethodGet, base+"/virtualMachines/0/instanceView"+v7, "")
	if doc := map[string]any{"properties": map[string]any{"instanceView": iv}}; PowerOf(doc) != PowerStopped {
		t.Errorf("instance view after powerOff: %v", iv)
	}

	// Availability sets: synchronous 200, no polling headers.
	resp, _ = do(http.MethodPut, "/subscriptions/"+sub+"/resourceGroups/"+rg+"/providers/Microsoft.Compute/availabilitySets/as"+v7,
		`{"location":"eastus","properties":{"platformFaultDomainCount":4}}`)
	if resp.StatusCode != 400 {
		t.Errorf("fault domain count 4: %d", resp.StatusCode)
	}
	resp, _ = do(http.MethodPut, "/subscriptions/"+sub+"/resourceGroups/"+rg+"/providers/Microsoft.Compute/availabilitySets/as"+v7,
		`{"location":"eastus","properties":{"platformFaultDomainCount":3}}`)
	if resp.StatusCode != 200 || resp.Header.Get("Azure-AsyncOperation") != "" {
		t.Errorf("availability set PUT: %d %v", resp.StatusCode, resp.Header)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
