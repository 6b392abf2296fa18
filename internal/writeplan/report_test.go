package writeplan

import (
	"strings"
	"testing"

	"github.com/azure-ccm/azure-ccm/internal/dryrun"
)

// A deletion that takes private endpoint connections with it names each, and the summary counts
// them.
func TestTextNamesWhatADeletionRemoves(t *testing.T) {
	const peID = "/subscriptions/c/resourceGroups/consumer/providers/Microsoft.Network/privateEndpoints/pe-1"
	p := &Plan{ClusterName: "k", Services: 1, Resources: []Resource{{
		Type: dryrun.TypePrivateLink, ID: "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/privateLinkServices/pls-a1",
		Name: "pls-a1", Action: "delete",
		Writes: []Write{{Op: dryrun.Delete, Actor: "service default/web", Removes: []dryrun.Dependent{
			{Kind: "private endpoint connection", Name: "pe-1.conn", Target: peID, State: "Approved"},
			{Kind: "private endpoint connection", Name: "pe-2.conn", State: "Pending"},
		}}},
	}}}
	var b strings.Builder
	if err := p.Text(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"    service default/web: deleted\n",
		"        removes private endpoint connection pe-1.conn (private endpoint " + peID + ", Approved)\n",
		"        removes private endpoint connection pe-2.conn (Pending)\n",
		"Plan: 0 to create, 0 to update, 1 to delete; 2 private endpoint connections removed with them; 0 problems.\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("plan text lacks %q:\n%s", want, b.String())
		}
	}
}
