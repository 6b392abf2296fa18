package network

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/recordings"
)

// Key skeletons of the response bodies of the published examples
// (PrivateLinkServiceGet, PrivateEndpointCreateForManualApproval,
// PrivateLinkServiceGetPrivateEndpointConnection,
// CheckPrivateLinkServiceVisibility): every key they show must be present.
const (
	plsShape = `{"name":"","id":"","type":"","location":"","etag":"","properties":{"provisioningState":"",
	"visibility":{"subscriptions":[""]},"autoApproval":{"subscriptions":[""]},"fqdns":[""],"alias":"",
	"loadBalancerFrontendIpConfigurations":[{"id":""}],
	"ipConfigurations":[{"name":"","id":"","properties":{"privateIPAddress":"","privateIPAllocationMethod":"","privateIPAddressVersion":"","subnet":{"id":""}}}],
	"privateEndpointConnections":[{"name":"","id":"","properties":{"privateEndpoint":{"id":""},"privateLinkServiceConnectionState":{"status":"","description":""}}}],
	"networkInterfaces":[{"id":""}]}}`
	peShape = `{"name":"","id":"","location":"","properties":{"provisioningState":"","privateLinkServiceConnections":[],
	"manualPrivateLinkServiceConnections":[{"id":"","properties":{"privateLinkServiceId":"","groupIds":[""],"requestMessage":"",
	"privateLinkServiceConnectionState":{"status":"","description":"","actionsRequired":""}}}],
	"subnet":{"id":""},"networkInterfaces":[{"id":""}],"customDnsConfigs":[],"applicationSecurityGroups":[],
	"ipConfigurations":[{"name":"","properties":{"groupId":"","memberName":"","privateIPAddress":""}}],"customNetworkInterfaceName":""}}`
	connShape       = `{"name":"","id":"","properties":{"privateEndpoint":{"id":""},"privateLinkServiceConnectionState":{"status":"","description":""}}}`
	visibilityShape = `{"visible":true}`
)

func TestSpecExampleShapes(t *testing.T) {
	v := newPLSEnv(t, arm.Config{}, 1)
	body := plsBody(v.fe[0], v.natSubnet, "10.0.2.4")
	body.Properties.Visibility = &armnetwork.PrivateLinkServicePropertiesVisibility{Subscriptions: []*string{ptr(subB), ptr("subscription2")}}
	body.Properties.AutoApproval = &armnetwork.PrivateLinkServicePropertiesAutoApproval{Subscriptions: []*string{ptr("subscription1")}}
	body.Properties.Fqdns = []*string{ptr("fqdn1")}
	pls := v.mustPLS("testPls", body)
	b := v.consumerNet(subB)
	pe := endpointBody(b.subnet, *pls.ID, true)
	conn := pe.Properties.ManualPrivateLinkServiceConnections[0]
	conn.Properties.GroupIDs = []*string{ptr("groupIdFromResource")}
	pe.Properties.IPConfigurations = []*armnetwork.PrivateEndpointIPConfiguration{{Name: ptr("pestaticconfig"),
		Properties: &armnetwork.PrivateEndpointIPConfigurationProperties{GroupID: ptr("file"), MemberName: ptr("file"), PrivateIPAddress: ptr("192.168.1.5")}}}
	pe.Properties.CustomNetworkInterfaceName = ptr("testPeNic")
	created, err := b.put(v, "testPe", pe)
	if err != nil {
		t.Fatal(err)
	}
	if *created.Properties.NetworkInterfaces[0].ID != "/subscriptions/"+subB+"/resourceGroups/consumer/providers/Microsoft.Network/networkInterfaces/testPeNic" {
		t.Fatalf("custom interface name not used: %s", *created.Properties.NetworkInterfaces[0].ID)
	}
	_, err = b.put(v, "other", func() armnetwork.PrivateEndpoint {
		o := endpointBody(b.subnet, *pls.ID, true)
		o.Properties.CustomNetworkInterfaceName = ptr("testPeNic")
		return o
	}())
	wantCode(t, err, 400, "CustomNetworkInterfaceNameAlreadyExists")
	_, err = b.put(v, "taken", func() armnetwork.PrivateEndpoint {
		o := endpointBody(b.subnet, *pls.ID, true)
		o.Properties.IPConfigurations = pe.Properties.IPConfigurations
		return o
	}())
	wantCode(t, err, 400, "PrivateIPAddressInUse")

	got := v.rawJSON(*pls.ID)
	connID := arm.Str(arm.Arr(got, "properties", "privateEndpointConnections")[0], "id")
	check := func(what, shape string, doc any) {
		t.Helper()
		b, _ := json.Marshal(doc)
		if miss := recordings.MissingKeys(shape, string(b)); len(miss) > 0 {
			t.Errorf("%s lacks %v", what, miss)
		}
	}
	check("private link service", plsShape, got)
	check("private endpoint", peShape, v.rawJSON(*created.ID))
	check("private endpoint connection", connShape, v.rawJSON(connID))
	alias := arm.Str(got, "properties", "alias")
	resp := v.raw(http.MethodPost, "/subscriptions/"+subB+"/providers/Microsoft.Network/locations/eastus/checkPrivateLinkServiceVisibility?api-version="+apiVersion,
		`{"privateLinkServiceAlias":"`+alias+`"}`, nil)
	rb, _ := io.ReadAll(resp.Body)
	doc, _ := arm.DecodeDoc(rb)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("visibility: %d %s", resp.StatusCode, rb)
	}
	check("visibility", visibilityShape, doc)
}
