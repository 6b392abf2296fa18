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

// putNSGRule PUTs an NSG holding one rule whose properties are a valid rule changed by edit,
// and returns the status and ARM error code.
func (v *env) putNSGRule(name string, edit func(p map[string]any)) (int, string, string) {
	v.t.Helper()
	p := map[string]any{"protocol": "Tcp", "access": "Allow", "direction": "Inbound", "priority": 500,
		"sourcePortRange": "*", "sourceAddressPrefixes": []any{"10.0.0.0/24", "192.168.1.1"},
		"destinationAddressPrefix": "203.0.113.5", "destinationPortRanges": []any{"80", "443"}}
	edit(p)
	body, _ := json.Marshal(map[string]any{"location": testLoc, "properties": map[string]any{
		"securityRules": []any{map[string]any{"name": name, "properties": p}}}})
	resp := v.raw(http.MethodPut, "/subscriptions/"+testSub+"/resourceGroups/"+testRG+"/providers/Microsoft.Network/networkSecurityGroups/nsg?api-version=2025-05-01", string(body), nil)
	b, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	_ = json.Unmarshal(b, &e)
	return resp.StatusCode, e.Error.Code, e.Error.Message
}

// NRP's checks of a security rule (SecurityRulePropertiesFormat in networkSecurityGroup.json;
// NetworkSecurityGroups_CreateOrUpdate and SecurityRules_CreateOrUpdate): enums, priority range,
// port ranges, address prefixes, no tags in the plural lists, no duplicate values.
func TestSecurityRuleValidation(t *testing.T) {
	v := newEnv(t, arm.Config{})
	v.mustRG(testRG)
	set := func(kv ...any) func(map[string]any) {
		return func(p map[string]any) {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i+1] == nil {
					delete(p, kv[i].(string))
				} else {
					p[kv[i].(string)] = kv[i+1]
				}
			}
		}
	}
	list := func(vs ...string) []any {
		out := make([]any, len(vs))
		for i, s := range vs {
			out[i] = s
		}
		return out
	}
	for _, c := range []struct {
		name string
		edit func(map[string]any)
		code string // "" = accepted
	}{
		{"valid", set(), ""},
		{"lower-case enums", set("protocol", "udp", "access", "deny", "direction", "outbound"), ""},
		{"every protocol", set("protocol", "*"), ""},
		{"tags and * in the singular fields", set("sourceAddressPrefixes", nil, "sourceAddressPrefix", "Storage.EastUS", "destinationAddressPrefix", "*"), ""},
		{"IPv6 and ranges", set("sourceAddressPrefixes", list("fd00::/64", "2001:db8::1", "10.0.0.1-10.0.0.9"), "destinationPortRanges", list("1000-2000", "0", "65535")), ""},
		{"no protocol", set("protocol", nil), "SecurityRuleInvalidProtocol"},
		{"unknown protocol", set("protocol", "Sctp"), "SecurityRuleInvalidProtocol"},
		{"unknown access", set("access", "Permit"), "SecurityRuleInvalidAccess"},
		{"unknown direction", set("direction", "Both"), "SecurityRuleInvalidDirection"},
		{"priority 99", set("priority", 99), "SecurityRuleInvalidPriority"},
		{"priority 4097", set("priority", 4097), "SecurityRuleInvalidPriority"},
		{"port 65536", set("destinationPortRanges", list("65536")), "SecurityRuleInvalidPortRange"},
		{"comma-separated ports", set("destinationPortRanges", nil, "destinationPortRange", "80,443"), "SecurityRuleInvalidPortRange"},
		{"inverted range", set("sourcePortRange", "2000-1000"), "SecurityRuleInvalidPortRange"},
		{"bad prefix", set("destinationAddressPrefix", "10.0.0.0/33"), "SecurityRuleInvalidAddressPrefix"},
		{"bad address in a list", set("sourceAddressPrefixes", list("10.0.0.0/24", "10.0.0.300")), "SecurityRuleInvalidAddressPrefix"},
		{"tag in a list", set("sourceAddressPrefixes", list("10.0.0.0/24", "Internet")), "SecurityRuleParameterContainsUnsupportedValue"},
		{"* in a list", set("destinationAddressPrefixes", list("*"), "destinationAddressPrefix", nil), "SecurityRuleParameterContainsUnsupportedValue"},
		{"duplicate source prefix", set("sourceAddressPrefixes", list("10.0.0.0/24", "192.168.1.1", "10.0.0.0/24")), "SecurityRuleParameterContainsDuplicateValue"},
		{"duplicate destination prefix", set("destinationAddressPrefix", nil, "destinationAddressPrefixes", list("203.0.113.5", "203.0.113.5")), "SecurityRuleParameterContainsDuplicateValue"},
		{"duplicate destination port", set("destinationPortRanges", list("80", "443", "80")), "SecurityRuleParameterContainsDuplicateValue"},
		{"duplicate source port", set("sourcePortRange", nil, "sourcePortRanges", list("1000-2000", "1000-2000")), "SecurityRuleParameterContainsDuplicateValue"},
	} {
		status, code, msg := v.putNSGRule("rule1", c.edit)
		switch {
		case c.code == "" && status/100 != 2:
			t.Errorf("%s: %d %s %s, want accepted", c.name, status, code, msg)
		case c.code != "" && (status != http.StatusBadRequest || code != c.code):
			t.Errorf("%s: %d %s, want 400 %s", c.name, status, code, c.code)
		}
		if c.code == "SecurityRuleParameterContainsDuplicateValue" && !(strings.Contains(msg, "/securityRules/rule1") && (strings.Contains(msg, "10.0.0.0/24") ||
			strings.Contains(msg, "203.0.113.5") || strings.Contains(msg, " 80 ") || strings.Contains(msg, "1000-2000"))) {
			t.Errorf("%s: the message names neither the rule nor the value: %s", c.name, msg)
		}
	}

	// The rule's own API is held to the same checks.
	rule := armnetwork.SecurityRule{Properties: &armnetwork.SecurityRulePropertiesFormat{
		Protocol: ptr(armnetwork.SecurityRuleProtocolTCP), Access: ptr(armnetwork.SecurityRuleAccessAllow),
		Direction: ptr(armnetwork.SecurityRuleDirectionInbound), Priority: ptr[int32](600),
		SourceAddressPrefixes: []*string{ptr("10.1.0.0/16"), ptr("10.1.0.0/16")}, SourcePortRange: ptr("*"),
		DestinationAddressPrefix: ptr("203.0.113.5"), DestinationPortRange: ptr("80")}}
	_, err := v.net.NewSecurityRulesClient().BeginCreateOrUpdate(v.ctx, testRG, "nsg", "rule2", rule, nil)
	wantCode(t, err, http.StatusBadRequest, "SecurityRuleParameterContainsDuplicateValue")
	rule.Properties.SourceAddressPrefixes = rule.Properties.SourceAddressPrefixes[:1]
	p, err := v.net.NewSecurityRulesClient().BeginCreateOrUpdate(v.ctx, testRG, "nsg", "rule2", rule, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PollUntilDone(v.ctx, fastPoll); err != nil {
		t.Fatal(err)
	}
}
