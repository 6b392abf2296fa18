package network

import (
	"slices"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// A public IP prefix lists every public IP allocated from it as a reference
// (PublicIPPrefixPropertiesFormat.publicIPAddresses, ReferencedPublicIpAddress, in
// publicIpPrefix.json), kept as public IPs are created and deleted; a prefix without any
// has no such field, as the recorded publicipprefix.yaml GETs show.
func TestPublicIPPrefixListsItsAddresses(t *testing.T) {
	v := newEnv(t, arm.Config{})
	v.mustRG(testRG)
	prefixes := v.net.NewPublicIPPrefixesClient()
	mkPrefix := func(name string) string {
		p, err := prefixes.BeginCreateOrUpdate(v.ctx, testRG, name, armnetwork.PublicIPPrefix{Location: ptr(testLoc),
			SKU:        &armnetwork.PublicIPPrefixSKU{Name: ptr(armnetwork.PublicIPPrefixSKUNameStandard)},
			Properties: &armnetwork.PublicIPPrefixPropertiesFormat{PrefixLength: ptr[int32](29)}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := p.PollUntilDone(v.ctx, fastPoll)
		if err != nil {
			t.Fatal(err)
		}
		return *res.ID
	}
	pfxA, pfxB := mkPrefix("a"), mkPrefix("b")
	listed := func(name string) []string {
		t.Helper()
		p, err := prefixes.Get(v.ctx, testRG, name, nil)
		if err != nil {
			t.Fatal(err)
		}
		if raw := v.rawJSON(*p.ID); arm.Props(raw)["publicIPAddresses"] != nil && len(p.Properties.PublicIPAddresses) == 0 {
			t.Fatalf("prefix %s shows an empty publicIPAddresses", name)
		}
		var out []string
		for _, r := range p.Properties.PublicIPAddresses {
			out = append(out, strings.ToLower(*r.ID))
		}
		return out
	}
	fromPrefix := func(name, prefix string) string {
		t.Helper()
		pip, err := v.putPIP(name, armnetwork.PublicIPAddress{SKU: stdSKU(), Properties: &armnetwork.PublicIPAddressPropertiesFormat{
			PublicIPPrefix: &armnetwork.SubResource{ID: &prefix}}})
		if err != nil {
			t.Fatal(err)
		}
		return strings.ToLower(*pip.ID)
	}
	deletePIP := func(name string) {
		t.Helper()
		p, err := v.net.NewPublicIPAddressesClient().BeginDelete(v.ctx, testRG, name, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.PollUntilDone(v.ctx, fastPoll); err != nil {
			t.Fatal(err)
		}
	}

	if got := listed("a"); len(got) != 0 {
		t.Fatalf("new prefix lists %v", got)
	}
	p1, p2 := fromPrefix("p1", pfxA), fromPrefix("p2", pfxA)
	if _, err := v.putPIP("other", armnetwork.PublicIPAddress{SKU: stdSKU()}); err != nil {
		t.Fatal(err)
	}
	if got := listed("a"); !slices.Equal(got, []string{p1, p2}) {
		t.Fatalf("prefix a lists %v, want [%s %s]", got, p1, p2)
	}
	p3 := fromPrefix("p3", pfxB)
	deletePIP("p2")
	if got, gotB := listed("a"), listed("b"); !slices.Equal(got, []string{p1}) || !slices.Equal(gotB, []string{p3}) {
		t.Fatalf("after p2's delete: a %v, b %v", got, gotB)
	}
	deletePIP("p1")
	deletePIP("p3")
	if got, gotB := listed("a"), listed("b"); len(got) != 0 || len(gotB) != 0 {
		t.Fatalf("after the deletes: a %v, b %v", got, gotB)
	}
}
