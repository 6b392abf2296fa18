package loadbalancer

import (
	"slices"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

func TestReplacePublicIP(t *testing.T) {
	pip := func(name, ip string) *armnetwork.PublicIPAddress {
		return &armnetwork.PublicIPAddress{Name: to.Ptr(name), Properties: &armnetwork.PublicIPAddressPropertiesFormat{IPAddress: to.Ptr(ip)}}
	}
	names := func(items []*armnetwork.PublicIPAddress) []string {
		var out []string
		for _, p := range items {
			out = append(out, *p.Name+"="+*p.Properties.IPAddress)
		}
		return out
	}
	list := []*armnetwork.PublicIPAddress{pip("a", "1.1.1.1"), pip("b", "2.2.2.2")}
	for _, tc := range []struct {
		name   string
		pip    string
		stored *armnetwork.PublicIPAddress
		want   []string
	}{
		{"new IP appended", "c", pip("c", "3.3.3.3"), []string{"a=1.1.1.1", "b=2.2.2.2", "c=3.3.3.3"}},
		{"existing IP replaced (names are case-insensitive)", "A", pip("a", "9.9.9.9"), []string{"b=2.2.2.2", "a=9.9.9.9"}},
		{"deleted IP removed", "b", nil, []string{"a=1.1.1.1"}},
		{"deleting an unknown IP changes nothing", "zz", nil, []string{"a=1.1.1.1", "b=2.2.2.2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := names(replacePublicIP(list, tc.pip, tc.stored))
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			if n := names(list); !slices.Equal(n, []string{"a=1.1.1.1", "b=2.2.2.2"}) {
				t.Fatalf("input modified: %v", n)
			}
		})
	}
}
