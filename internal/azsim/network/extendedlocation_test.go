package network

import (
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

func edge(name string) *armnetwork.ExtendedLocation {
	return &armnetwork.ExtendedLocation{Name: ptr(name), Type: ptr(armnetwork.ExtendedLocationTypesEdgeZone)}
}

// Edge zones: extendedLocation is accepted and returned on public IPs and load balancers,
// fixed at creation, exclusive with zones, and a frontend references only public IPs of its
// own extended location.
func TestExtendedLocation(t *testing.T) {
	v := newEnv(t, arm.Config{})
	v.mustRG(testRG)
	lbSKU := &armnetwork.LoadBalancerSKU{Name: ptr(armnetwork.LoadBalancerSKUNameStandard)}
	pipIn := func(name string, el *armnetwork.ExtendedLocation, zones ...string) (armnetwork.PublicIPAddress, error) {
		p := armnetwork.PublicIPAddress{SKU: stdSKU(), ExtendedLocation: el}
		for _, z := range zones {
			p.Zones = append(p.Zones, ptr(z))
		}
		return v.putPIP(name, p)
	}
	lbWith := func(el *armnetwork.ExtendedLocation, pipID string) armnetwork.LoadBalancer {
		return armnetwork.LoadBalancer{SKU: lbSKU, ExtendedLocation: el, Properties: &armnetwork.LoadBalancerPropertiesFormat{
			FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{Name: ptr("fe"),
				Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{PublicIPAddress: &armnetwork.PublicIPAddress{ID: ptr(pipID)}}}}}}
	}
	edgePIP, err := pipIn("edge-pip", edge("microsoftlosangeles1"))
	if err != nil {
		t.Fatal(err)
	}
	if edgePIP.ExtendedLocation == nil || *edgePIP.ExtendedLocation.Name != "microsoftlosangeles1" || *edgePIP.ExtendedLocation.Type != armnetwork.ExtendedLocationTypesEdgeZone {
		t.Fatalf("extendedLocation not returned: %+v", edgePIP.ExtendedLocation)
	}
	regional, err := pipIn("regional-pip", nil)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := v.putLB("edge-lb", lbWith(edge("microsoftlosangeles1"), *edgePIP.ID))
	if err != nil {
		t.Fatal(err)
	}
	if lb.ExtendedLocation == nil || *lb.ExtendedLocation.Name != "microsoftlosangeles1" {
		t.Fatalf("load balancer extendedLocation %+v", lb.ExtendedLocation)
	}
	for _, tc := range []struct {
		name string
		do   func() error
		code string
	}{
		{"zones with an extended location", func() error { _, err := pipIn("z", edge("microsoftlosangeles1"), "1"); return err }, "ZonesNotSupportedInExtendedLocation"},
		{"wrong type", func() error {
			_, err := pipIn("w", &armnetwork.ExtendedLocation{Name: ptr("x"), Type: ptr(armnetwork.ExtendedLocationTypes("Region"))})
			return err
		}, "InvalidRequestFormat"},
		{"extended location changed", func() error { _, err := pipIn("edge-pip", edge("microsoftdallas1")); return err }, "ExtendedLocationCannotBeChanged"},
		{"extended location removed", func() error { _, err := pipIn("edge-pip", nil); return err }, "ExtendedLocationCannotBeChanged"},
		{"edge load balancer references a regional public IP", func() error {
			_, err := v.putLB("edge-lb2", lbWith(edge("microsoftlosangeles1"), *regional.ID))
			return err
		}, "ResourceMayNotReferenceCrossLocationResource"},
		{"regional load balancer references an edge public IP", func() error {
			_, err := v.putLB("lb3", lbWith(nil, *edgePIP.ID))
			return err
		}, "ResourceMayNotReferenceCrossLocationResource"},
	} {
		if err := tc.do(); err == nil || !strings.Contains(err.Error(), tc.code) {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
}
