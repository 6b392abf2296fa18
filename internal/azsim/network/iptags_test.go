package network

import (
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// IP tags of an existing public IP: only FirstPartyUsage ones change; others are refused.
func TestPublicIPTagsChange(t *testing.T) {
	v := newEnv(t, arm.Config{})
	v.mustRG(testRG)
	tag := func(typ, val string) *armnetwork.IPTag { return &armnetwork.IPTag{IPTagType: ptr(typ), Tag: ptr(val)} }
	body := func(tags ...*armnetwork.IPTag) armnetwork.PublicIPAddress {
		return armnetwork.PublicIPAddress{SKU: stdSKU(), Properties: &armnetwork.PublicIPAddressPropertiesFormat{IPTags: tags}}
	}
	if _, err := v.putPIP("p", body(tag("FirstPartyUsage", "/Prod"), tag("RoutingPreference", "Internet"))); err != nil {
		t.Fatal(err)
	}
	got, err := v.putPIP("p", body(tag("RoutingPreference", "Internet"), tag("FirstPartyUsage", "/NonProd")))
	if err != nil {
		t.Fatalf("FirstPartyUsage change refused: %v", err)
	}
	if len(got.Properties.IPTags) != 2 {
		t.Fatalf("ip tags %v", got.Properties.IPTags)
	}
	for _, tc := range []struct {
		name string
		tags []*armnetwork.IPTag
	}{
		{"RoutingPreference removed", []*armnetwork.IPTag{tag("FirstPartyUsage", "/NonProd")}},
		{"RoutingPreference changed", []*armnetwork.IPTag{tag("FirstPartyUsage", "/NonProd"), tag("RoutingPreference", "MicrosoftNetwork")}},
		{"type added", []*armnetwork.IPTag{tag("FirstPartyUsage", "/NonProd"), tag("RoutingPreference", "Internet"), tag("NetworkDomain", "x")}},
	} {
		_, err := v.putPIP("p", body(tc.tags...))
		if err == nil || !strings.Contains(err.Error(), "PublicIPIpTagsCannotBeChanged") {
			t.Errorf("%s: %v, want PublicIPIpTagsCannotBeChanged", tc.name, err)
		}
	}
}
