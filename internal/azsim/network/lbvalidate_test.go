package network

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// putRaw PUTs a document and returns the status and ARM error code.
func (v *env) putRaw(path string, doc map[string]any) (int, string) {
	v.t.Helper()
	body, _ := json.Marshal(doc)
	resp := v.raw(http.MethodPut, path+"?api-version=2025-05-01", string(body), nil)
	b, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(b, &e)
	return resp.StatusCode, e.Error.Code
}

// elem returns properties of the first element of a load balancer array in doc.
func elem(doc map[string]any, field string) map[string]any {
	return arm.Props(arm.Arr(doc, "properties", field)[0])
}

// NRP's checks of load balancer elements (loadBalancer.json, LoadBalancers_CreateOrUpdate:
// LoadBalancingRulePropertiesFormat, ProbePropertiesFormat, OutboundRulePropertiesFormat) and of
// element names (1-80 word characters, '.', '-', '_').
func TestLoadBalancerElementValidation(t *testing.T) {
	v := newEnv(t, arm.Config{})
	v.mustRG(testRG)
	pip, err := v.putPIP("pip", armnetwork.PublicIPAddress{SKU: stdSKU()})
	if err != nil {
		t.Fatal(err)
	}
	lbID := "/subscriptions/" + testSub + "/resourceGroups/" + testRG + "/providers/Microsoft.Network/loadBalancers/lb"
	base := func() map[string]any {
		return map[string]any{"location": testLoc, "sku": map[string]any{"name": "Standard"}, "properties": map[string]any{
			"frontendIPConfigurations": []any{map[string]any{"name": "fe", "properties": map[string]any{"publicIPAddress": map[string]any{"id": *pip.ID}}}},
			"backendAddressPools":      []any{map[string]any{"name": "pool"}},
			"probes": []any{map[string]any{"name": "probe", "properties": map[string]any{
				"protocol": "Tcp", "port": 30080, "intervalInSeconds": 5, "probeThreshold": 2}}},
			"loadBalancingRules": []any{map[string]any{"name": "rule", "properties": map[string]any{
				"protocol": "Tcp", "frontendPort": 80, "backendPort": 80, "idleTimeoutInMinutes": 4, "loadDistribution": "Default",
				"frontendIPConfiguration": map[string]any{"id": lbID + "/frontendIPConfigurations/fe"},
				"backendAddressPool":      map[string]any{"id": lbID + "/backendAddressPools/pool"},
				"probe":                   map[string]any{"id": lbID + "/probes/probe"}}}},
			"outboundRules": []any{map[string]any{"name": "out", "properties": map[string]any{
				"protocol": "All", "allocatedOutboundPorts": 1024, "idleTimeoutInMinutes": 30,
				"frontendIPConfigurations": []any{map[string]any{"id": lbID + "/frontendIPConfigurations/fe"}},
				"backendAddressPool":       map[string]any{"id": lbID + "/backendAddressPools/pool"}}}},
		}}
	}
	set := func(field string, kv ...any) func(map[string]any) {
		return func(d map[string]any) {
			p := elem(d, field)
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i+1] == nil {
					delete(p, kv[i].(string))
				} else {
					p[kv[i].(string)] = kv[i+1]
				}
			}
		}
	}
	rename := func(field, name string) func(map[string]any) {
		return func(d map[string]any) { arm.Arr(d, "properties", field)[0]["name"] = name }
	}
	for _, c := range []struct {
		name string
		edit func(map[string]any)
		code string
	}{
		{"valid", func(map[string]any) {}, ""},
		{"HA ports", set("loadBalancingRules", "protocol", "All", "frontendPort", 0, "backendPort", 0), ""},
		{"idle timeout 100", set("loadBalancingRules", "idleTimeoutInMinutes", 100), ""},
		{"HTTP probe with a path", set("probes", "protocol", "Http", "requestPath", "/healthz"), ""},
		{"80-character rule name", rename("loadBalancingRules", strings.Repeat("r", 80)), ""},
		{"rule name with dots, dashes, underscores", rename("loadBalancingRules", "a.b-c_d_"), ""},
		{"81-character rule name", rename("loadBalancingRules", strings.Repeat("r", 81)), "InvalidResourceName"},
		{"rule name ending in '.'", rename("loadBalancingRules", "rule."), "InvalidResourceName"},
		{"probe name with '/'", rename("probes", "a/b"), "InvalidResourceName"},
		{"frontend name with a space", rename("frontendIPConfigurations", "f e"), "InvalidResourceName"},
		{"rule protocol Sctp", set("loadBalancingRules", "protocol", "Sctp"), "InvalidRequestFormat"},
		{"rule without frontendPort", set("loadBalancingRules", "frontendPort", nil), "InvalidRequestFormat"},
		{"frontend port 65535", set("loadBalancingRules", "frontendPort", 65535), "InvalidLoadBalancingRuleFrontendPort"},
		{"backend port 65536", set("loadBalancingRules", "backendPort", 65536), "InvalidLoadBalancingRuleBackendPort"},
		{"idle timeout 3", set("loadBalancingRules", "idleTimeoutInMinutes", 3), "InvalidIdleTimeoutInMinutes"},
		{"idle timeout 101", set("loadBalancingRules", "idleTimeoutInMinutes", 101), "InvalidIdleTimeoutInMinutes"},
		{"load distribution", set("loadBalancingRules", "loadDistribution", "RoundRobin"), "InvalidRequestFormat"},
		{"probe protocol Udp", set("probes", "protocol", "Udp"), "InvalidRequestFormat"},
		{"probe port 0", set("probes", "port", 0), "InvalidProbePort"},
		{"probe interval 4", set("probes", "intervalInSeconds", 4), "InvalidProbeIntervalInSeconds"},
		{"HTTP probe without a path", set("probes", "protocol", "Https"), "InvalidProbeRequestPath"},
		{"TCP probe with a path", set("probes", "requestPath", "/healthz"), "InvalidProbeRequestPath"},
		{"outbound rule without frontends", set("outboundRules", "frontendIPConfigurations", []any{}), "OutboundRuleMustHaveFrontendIPConfiguration"},
		{"outbound rule without pool", set("outboundRules", "backendAddressPool", nil), "InvalidRequestFormat"},
		{"outbound rule protocol", set("outboundRules", "protocol", "Icmp"), "InvalidRequestFormat"},
		{"outbound ports not a multiple of 8", set("outboundRules", "allocatedOutboundPorts", 1004), "InvalidAllocatedOutboundPorts"},
		{"outbound ports 64008", set("outboundRules", "allocatedOutboundPorts", 64008), "InvalidAllocatedOutboundPorts"},
		{"outbound idle timeout 121", set("outboundRules", "idleTimeoutInMinutes", 121), "InvalidIdleTimeoutInMinutes"},
		{"frontend allocation method", set("frontendIPConfigurations", "privateIPAllocationMethod", "Fixed"), "InvalidRequestFormat"},
	} {
		doc := base()
		c.edit(doc)
		status, code := v.putRaw(lbID, doc)
		switch {
		case c.code == "" && status/100 != 2:
			t.Errorf("%s: %d %s, want accepted", c.name, status, code)
		case c.code != "" && (status != http.StatusBadRequest || code != c.code):
			t.Errorf("%s: %d %s, want 400 %s", c.name, status, code, c.code)
		}
	}
}

// Names of NSG security rules and routes follow the same rule (networkSecurityGroup.json,
// routeTable.json); a route's nextHopType is one of RouteNextHopType's values.
func TestSecurityRuleAndRouteNames(t *testing.T) {
	v := newEnv(t, arm.Config{})
	v.mustRG(testRG)
	if status, code, _ := v.putNSGRule(strings.Repeat("n", 81), func(map[string]any) {}); status != http.StatusBadRequest || code != "InvalidResourceName" {
		t.Errorf("81-character security rule name: %d %s", status, code)
	}
	rtID := "/subscriptions/" + testSub + "/resourceGroups/" + testRG + "/providers/Microsoft.Network/routeTables/rt"
	route := func(name, hop string) map[string]any {
		return map[string]any{"location": testLoc, "properties": map[string]any{"routes": []any{map[string]any{"name": name,
			"properties": map[string]any{"addressPrefix": "10.244.1.0/24", "nextHopType": hop, "nextHopIpAddress": "10.240.0.4"}}}}}
	}
	for _, c := range []struct{ name, hop, code string }{
		{"aks-node-0____10.244.1.0__24", "VirtualAppliance", ""},
		{"bad/name", "VirtualAppliance", "InvalidResourceName"},
		{"r", "Appliance", "InvalidRequestFormat"},
	} {
		status, code := v.putRaw(rtID, route(c.name, c.hop))
		if (c.code == "" && status/100 != 2) || (c.code != "" && code != c.code) {
			t.Errorf("route %q via %s: %d %s, want %q", c.name, c.hop, status, code, c.code)
		}
	}
}

// publicIpAddress.json's PublicIPAddressDnsSettings.domainNameLabel: NRP refuses a label that
// does not match ^[a-z][a-z0-9-]{1,61}[a-z0-9]$ with InvalidDomainNameLabel, capitals included
// (its answer to "LABexample" is on public record); allocation method and IP version take the
// spec's enum values.
func TestPublicIPValueChecks(t *testing.T) {
	v := newEnv(t, arm.Config{})
	v.mustRG(testRG)
	label := func(l string) armnetwork.PublicIPAddress {
		return armnetwork.PublicIPAddress{SKU: stdSKU(), Properties: &armnetwork.PublicIPAddressPropertiesFormat{
			DNSSettings: &armnetwork.PublicIPAddressDNSSettings{DomainNameLabel: ptr(l)}}}
	}
	for i, c := range []struct{ label, code string }{
		{"my-app-e2e", ""},
		{"a1b", ""},
		{"Svc1", "InvalidDomainNameLabel"},
		{"ab", "InvalidDomainNameLabel"},
		{"1abc", "InvalidDomainNameLabel"},
		{"abc-", "InvalidDomainNameLabel"},
		{"a_bc", "InvalidDomainNameLabel"},
		{"a" + strings.Repeat("b", 63), "InvalidDomainNameLabel"},
	} {
		_, err := v.putPIP("pip"+string(rune('a'+i)), label(c.label))
		if c.code == "" && err != nil {
			t.Errorf("label %q: %v", c.label, err)
		}
		if c.code != "" {
			if err == nil {
				t.Errorf("label %q accepted", c.label)
			} else if re := respErr(t, err); re.ErrorCode != c.code {
				t.Errorf("label %q: %s, want %s", c.label, re.ErrorCode, c.code)
			}
		}
	}
	_, err := v.putPIP("m", armnetwork.PublicIPAddress{SKU: stdSKU(), Properties: &armnetwork.PublicIPAddressPropertiesFormat{
		PublicIPAllocationMethod: ptr(armnetwork.IPAllocationMethod("Reserved"))}})
	wantCode(t, err, http.StatusBadRequest, "InvalidRequestFormat")
	_, err = v.putPIP("ver", armnetwork.PublicIPAddress{SKU: stdSKU(), Properties: &armnetwork.PublicIPAddressPropertiesFormat{
		PublicIPAddressVersion: ptr(armnetwork.IPVersion("IPv5"))}})
	wantCode(t, err, http.StatusBadRequest, "InvalidRequestFormat")
}
