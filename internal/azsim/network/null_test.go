package network

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// A null element in a list is refused as NRP refuses it, instead of being dropped by the model
// (which hid clients that sent "frontendIPConfigurations": [null]).
func TestNullListElementsAreRefused(t *testing.T) {
	e := arm.NewEngine(arm.Config{})
	Register(e)
	req := httptest.NewRequest(http.MethodPut, "https://azsim.test/subscriptions/"+testSub+"/resourcegroups/"+testRG+"?api-version=2021-04-01", strings.NewReader(`{"location":"eastus"}`))
	req.Header.Set("Authorization", "Bearer x")
	e.ServeHTTP(httptest.NewRecorder(), req)
	for name, tc := range map[string]struct{ path, body, want string }{
		"load balancer frontend": {"/providers/Microsoft.Network/loadBalancers/lb",
			`{"location":"eastus","sku":{"name":"Standard"},"properties":{"frontendIPConfigurations":[null]}}`, "properties.frontendIPConfigurations[0] is null"},
		"load balancer pool after a good one": {"/providers/Microsoft.Network/loadBalancers/lb",
			`{"location":"eastus","sku":{"name":"Standard"},"properties":{"backendAddressPools":[{"name":"a"},null]}}`, "properties.backendAddressPools[1] is null"},
		"NSG rule": {"/providers/Microsoft.Network/networkSecurityGroups/nsg",
			`{"location":"eastus","properties":{"securityRules":[null]}}`, "properties.securityRules[0] is null"},
		"nested list": {"/providers/Microsoft.Network/networkSecurityGroups/nsg",
			`{"location":"eastus","properties":{"securityRules":[{"name":"r","properties":{"protocol":"Tcp","access":"Allow","direction":"Inbound","priority":100,"sourceAddressPrefixes":["10.0.0.0/8",null]}}]}}`,
			"properties.securityRules[0].properties.sourceAddressPrefixes[1] is null"},
		"route": {"/providers/Microsoft.Network/routeTables/rt", `{"location":"eastus","properties":{"routes":[null]}}`, "properties.routes[0] is null"},
	} {
		t.Run(name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPut, "https://azsim.test"+rgPath+tc.path+"?api-version=2025-05-01", strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer x")
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, req)
			if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "InvalidRequestFormat") || !strings.Contains(rec.Body.String(), tc.want) {
				t.Fatalf("HTTP %d %s, want 400 InvalidRequestFormat naming %s", rec.Code, rec.Body, tc.want)
			}
		})
	}
}
