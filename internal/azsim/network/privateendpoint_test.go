package network

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v3"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/recordings"
)

// Consumer subscriptions: B may see the service, C is auto-approved, D sees nothing.
const (
	subB = "00000000-0000-0000-0000-0000000000b0"
	subC = "00000000-0000-0000-0000-0000000000c0"
	subD = "00000000-0000-0000-0000-0000000000d0"
)

// consumerNet is a consumer subscription with a resource group "consumer" and
// a VNet "cvnet" (192.168.0.0/16, subnet "pe").
type consumerNet struct {
	sub    string
	net    *armnetwork.ClientFactory
	subnet string
}

func (v *plsEnv) consumerNet(sub string) consumerNet {
	v.t.Helper()
	f, rgs := v.consumer(sub)
	if _, err := rgs.CreateOrUpdate(v.ctx, "consumer", armresourcesGroup(testLoc), nil); err != nil {
		v.t.Fatal(err)
	}
	p, err := f.NewVirtualNetworksClient().BeginCreateOrUpdate(v.ctx, "consumer", "cvnet", vnetBody("192.168.0.0/16", "pe", "192.168.1.0/24"), nil)
	if err != nil {
		v.t.Fatal(err)
	}
	vn, err := p.PollUntilDone(v.ctx, fastPoll)
	if err != nil {
		v.t.Fatal(err)
	}
	return consumerNet{sub: sub, net: f, subnet: *vn.Properties.Subnets[0].ID}
}

func endpointBody(subnet, target string, manual bool) armnetwork.PrivateEndpoint {
	conn := &armnetwork.PrivateLinkServiceConnection{Name: ptr("plsconnection1"), Properties: &armnetwork.PrivateLinkServiceConnectionProperties{
		PrivateLinkServiceID: &target, RequestMessage: ptr("Please approve my connection.")}}
	pe := armnetwork.PrivateEndpoint{Location: ptr(testLoc), Properties: &armnetwork.PrivateEndpointProperties{Subnet: &armnetwork.Subnet{ID: &subnet}}}
	if manual {
		pe.Properties.ManualPrivateLinkServiceConnections = []*armnetwork.PrivateLinkServiceConnection{conn}
	} else {
		pe.Properties.PrivateLinkServiceConnections = []*armnetwork.PrivateLinkServiceConnection{conn}
	}
	return pe
}

func (c consumerNet) put(v *plsEnv, name string, pe armnetwork.PrivateEndpoint) (armnetwork.PrivateEndpoint, error) {
	v.t.Helper()
	p, err := c.net.NewPrivateEndpointsClient().BeginCreateOrUpdate(v.ctx, "consumer", name, pe, nil)
	if err != nil {
		return armnetwork.PrivateEndpoint{}, err
	}
	res, err := p.PollUntilDone(v.ctx, fastPoll)
	return res.PrivateEndpoint, err
}

func (c consumerNet) get(v *plsEnv, name string) armnetwork.PrivateEndpoint {
	v.t.Helper()
	got, err := c.net.NewPrivateEndpointsClient().Get(v.ctx, "consumer", name, nil)
	if err != nil {
		v.t.Fatal(err)
	}
	return got.PrivateEndpoint
}

// stateOf is the connection state an endpoint shows.
func stateOf(pe armnetwork.PrivateEndpoint) string {
	conns := append(pe.Properties.PrivateLinkServiceConnections, pe.Properties.ManualPrivateLinkServiceConnections...)
	if len(conns) != 1 {
		return "?"
	}
	return *conns[0].Properties.PrivateLinkServiceConnectionState.Status
}

// TestPrivateEndpointApprovalFlow follows the published PrivateEndpointCreate /
// PrivateEndpointCreateForManualApproval and PrivateLinkService*PrivateEndpointConnection
// examples across subscriptions: manual requests wait, the owner approves and
// rejects, auto-approval and visibility apply, removal disconnects the endpoint.
func TestPrivateEndpointApprovalFlow(t *testing.T) {
	v := newPLSEnv(t, arm.Config{}, 1)
	body := plsBody(v.fe[0], v.natSubnet)
	body.Properties.Visibility = &armnetwork.PrivateLinkServicePropertiesVisibility{Subscriptions: []*string{ptr(subB)}}
	body.Properties.AutoApproval = &armnetwork.PrivateLinkServicePropertiesAutoApproval{Subscriptions: []*string{ptr(subC)}}
	body.Properties.Fqdns = []*string{ptr("svc.example.com")}
	pls := v.mustPLS("testPls", body)
	plsClient := v.net.NewPrivateLinkServicesClient()
	b, c, d := v.consumerNet(subB), v.consumerNet(subC), v.consumerNet(subD)

	// A manual request from a visible subscription: Pending, awaiting approval.
	pe, err := b.put(v, "testPe", endpointBody(b.subnet, *pls.ID, true))
	if err != nil {
		t.Fatal(err)
	}
	peID := "/subscriptions/" + subB + "/resourceGroups/consumer/providers/Microsoft.Network/privateEndpoints/testPe"
	if *pe.ID != peID || *pe.Type != "Microsoft.Network/privateEndpoints" || *pe.Properties.ProvisioningState != armnetwork.ProvisioningStateSucceeded ||
		len(pe.Properties.PrivateLinkServiceConnections) != 0 || len(pe.Properties.ManualPrivateLinkServiceConnections) != 1 {
		t.Fatalf("endpoint %+v", pe.Properties)
	}
	mc := pe.Properties.ManualPrivateLinkServiceConnections[0]
	if *mc.ID != peID+"/manualPrivateLinkServiceConnections/plsconnection1" || *mc.Type != "Microsoft.Network/privateEndpoints/manualPrivateLinkServiceConnections" ||
		*mc.Properties.PrivateLinkServiceID != *pls.ID || *mc.Properties.RequestMessage != "Please approve my connection." ||
		*mc.Properties.PrivateLinkServiceConnectionState.Status != StatePending || *mc.Properties.PrivateLinkServiceConnectionState.Description != "Awaiting approval" ||
		*mc.Properties.PrivateLinkServiceConnectionState.ActionsRequired != "None" || *mc.Properties.ProvisioningState != armnetwork.ProvisioningStateSucceeded {
		t.Fatalf("manual connection %+v %+v", mc, mc.Properties)
	}
	// Its network interface lives in the consumer's group, with an address of the consumer's subnet.
	if len(pe.Properties.NetworkInterfaces) != 1 || !regexp.MustCompile(`/subscriptions/`+subB+`/resourceGroups/consumer/providers/Microsoft.Network/networkInterfaces/testPe\.nic\.`+guidPattern+`$`).MatchString(*pe.Properties.NetworkInterfaces[0].ID) {
		t.Fatalf("networkInterfaces %+v", pe.Properties.NetworkInterfaces)
	}
	nicID := *pe.Properties.NetworkInterfaces[0].ID
	nic, err := b.net.NewInterfacesClient().Get(v.ctx, "consumer", nicID[strings.LastIndex(nicID, "/")+1:], nil)
	if err != nil {
		t.Fatal(err)
	}
	nipc := nic.Properties.IPConfigurations[0]
	if *nic.Properties.PrivateEndpoint.ID != peID || !strings.HasPrefix(*nipc.Properties.PrivateIPAddress, "192.168.1.") ||
		!strings.HasPrefix(*nipc.Name, "privateEndpointIpConfig.") || *nipc.Properties.PrivateLinkConnectionProperties.Fqdns[0] != "svc.example.com" {
		t.Fatalf("endpoint nic %+v", nic.Properties)
	}
	sn, err := b.net.NewSubnetsClient().Get(v.ctx, "consumer", "cvnet", "pe", nil)
	if err != nil || len(sn.Properties.PrivateEndpoints) != 1 || *sn.Properties.PrivateEndpoints[0].ID != peID ||
		len(sn.Properties.IPConfigurations) != 1 || *sn.Properties.IPConfigurations[0].ID != *nipc.ID {
		t.Fatalf("consumer subnet %v %+v", err, sn.Properties)
	}
	_, err = b.net.NewInterfacesClient().BeginDelete(v.ctx, "consumer", *nic.Name, nil)
	wantCode(t, err, 400, "NicInUse")

	// The service lists the connection: <endpoint>.<guid>, pointing at the endpoint.
	got, _ := plsClient.Get(v.ctx, testRG, "testPls", nil)
	if len(got.Properties.PrivateEndpointConnections) != 1 {
		t.Fatalf("service connections %+v", got.Properties.PrivateEndpointConnections)
	}
	conn := got.Properties.PrivateEndpointConnections[0]
	connName := *conn.Name
	if !regexp.MustCompile(`^testPe\.`+guidPattern+`$`).MatchString(connName) ||
		*conn.ID != *pls.ID+"/privateEndpointConnections/"+connName || *conn.Type != "Microsoft.Network/privateLinkServices/privateEndpointConnections" ||
		*conn.Properties.PrivateEndpoint.ID != peID || *conn.Properties.PrivateLinkServiceConnectionState.Status != StatePending ||
		*conn.Properties.PrivateEndpointLocation != testLoc || !regexp.MustCompile(`^\d+$`).MatchString(*conn.Properties.LinkIdentifier) {
		t.Fatalf("service connection %+v %+v", conn, conn.Properties)
	}

	// The owner approves: a synchronous PUT answering 200 with the connection.
	approve := armnetwork.PrivateEndpointConnection{Name: &connName, Properties: &armnetwork.PrivateEndpointConnectionProperties{
		PrivateEndpoint:                   &armnetwork.PrivateEndpoint{ID: &peID},
		PrivateLinkServiceConnectionState: &armnetwork.PrivateLinkServiceConnectionState{Status: ptr("Approved"), Description: ptr("approved it for some reason.")}}}
	ab, _ := json.Marshal(approve)
	resp := v.raw(http.MethodPut, *conn.ID+"?api-version="+apiVersion, string(ab), nil)
	rb, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Azure-AsyncOperation") != "" {
		t.Fatalf("approve: %d %s", resp.StatusCode, rb)
	}
	var approved armnetwork.PrivateEndpointConnection
	if err := json.Unmarshal(rb, &approved); err != nil || *approved.Properties.PrivateLinkServiceConnectionState.Status != StateApproved ||
		*approved.Properties.PrivateLinkServiceConnectionState.Description != "approved it for some reason." || *approved.ID != *conn.ID {
		t.Fatalf("approve body %s", rb)
	}
	if st := stateOf(b.get(v, "testPe")); st != StateApproved {
		t.Fatalf("endpoint after approval: %s", st)
	}
	gc, err := plsClient.GetPrivateEndpointConnection(v.ctx, testRG, "testPls", connName, nil)
	if err != nil || *gc.Properties.PrivateLinkServiceConnectionState.Status != StateApproved {
		t.Fatalf("get connection: %v", err)
	}

	// No update of the service cuts an approved connection.
	body.Properties.Fqdns = []*string{ptr("svc.example.com"), ptr("svc2.example.com")}
	body.Properties.EnableProxyProtocol = ptr(true)
	body.Properties.IPConfigurations = plsBody(v.fe[0], v.natSubnet, "10.0.2.30", "").Properties.IPConfigurations
	if _, err := v.putPLS("testPls", body); err != nil {
		t.Fatal(err)
	}
	if st := stateOf(b.get(v, "testPe")); st != StateApproved {
		t.Fatalf("endpoint after service update: %s", st)
	}
	// Nor does an update of the endpoint itself.
	if again, err := b.put(v, "testPe", b.get(v, "testPe")); err != nil || stateOf(again) != StateApproved {
		t.Fatalf("endpoint re-PUT: %v", err)
	}

	// Automatic requests: refused without the approval right, approved on arrival when auto-approved.
	_, err = b.put(v, "auto", endpointBody(b.subnet, *pls.ID, false))
	wantCode(t, err, 403, "LinkedAuthorizationFailed")
	cpe, err := c.put(v, "auto", endpointBody(c.subnet, *pls.ID, false))
	if err != nil || stateOf(cpe) != StateApproved || *cpe.Properties.PrivateLinkServiceConnections[0].Properties.PrivateLinkServiceConnectionState.Description != "Auto-approved" {
		t.Fatalf("auto-approved endpoint: %v", err)
	}
	// Visibility: by ID or alias, a hidden service does not exist for D; a
	// visible one is found by its alias.
	_, err = d.put(v, "hidden", endpointBody(d.subnet, *pls.ID, true))
	wantCode(t, err, 400, "ThirdPartyPrivateLinkServiceProvidedDuringPrivateEndpointCreationDoesNotExistOrIsNotVisible")
	_, err = d.put(v, "hidden", endpointBody(d.subnet, *pls.Properties.Alias, true))
	wantCode(t, err, 400, "ThirdPartyPrivateLinkServiceProvidedDuringPrivateEndpointCreationDoesNotExistOrIsNotVisible")
	_, err = b.put(v, "nope", endpointBody(b.subnet, "nope.00000000-0000-0000-0000-000000000000.eastus.azure.privatelinkservice", true))
	wantCode(t, err, 400, "ThirdPartyPrivateLinkServiceProvidedDuringPrivateEndpointCreationDoesNotExistOrIsNotVisible")
	_, err = b.put(v, "bad", endpointBody(b.subnet, "not-an-id", true))
	wantCode(t, err, 400, "InvalidPrivateLinkServiceId")
	byAlias, err := b.put(v, "byAlias", endpointBody(b.subnet, *pls.Properties.Alias, true))
	if err != nil || stateOf(byAlias) != StatePending {
		t.Fatalf("by alias: %v", err)
	}
	two := endpointBody(b.subnet, *pls.ID, true)
	two.Properties.PrivateLinkServiceConnections = two.Properties.ManualPrivateLinkServiceConnections
	_, err = b.put(v, "two", two)
	wantCode(t, err, 400, "InvalidNumberOfPrivateLinkServiceConnectionsSpecified")

	// The consumer's lists (per group and subscription) show its endpoints.
	n := 0
	for pager := b.net.NewPrivateEndpointsClient().NewListBySubscriptionPager(nil); pager.More(); {
		page, err := pager.NextPage(v.ctx)
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.Value)
	}
	if gl := b.net.NewPrivateEndpointsClient().NewListPager("consumer", nil); n != 2 || !gl.More() {
		t.Fatalf("consumer B lists %d endpoints", n)
	}

	// The owner rejects the alias request.
	list := map[string]string{}
	pager := plsClient.NewListPrivateEndpointConnectionsPager(testRG, "testPls", nil)
	for pager.More() {
		page, err := pager.NextPage(v.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, pc := range page.Value {
			list[*pc.Properties.PrivateEndpoint.ID] = *pc.Name
		}
	}
	if len(list) != 3 {
		t.Fatalf("connections %v", list)
	}
	aliasConn := list["/subscriptions/"+subB+"/resourceGroups/consumer/providers/Microsoft.Network/privateEndpoints/byAlias"]
	rej, err := plsClient.UpdatePrivateEndpointConnection(v.ctx, testRG, "testPls", aliasConn, armnetwork.PrivateEndpointConnection{
		Properties: &armnetwork.PrivateEndpointConnectionProperties{PrivateLinkServiceConnectionState: &armnetwork.PrivateLinkServiceConnectionState{Status: ptr("Rejected")}}}, nil)
	if err != nil || *rej.Properties.PrivateLinkServiceConnectionState.Status != StateRejected {
		t.Fatalf("reject: %v", err)
	}
	if st := stateOf(b.get(v, "byAlias")); st != StateRejected {
		t.Fatalf("endpoint after rejection: %s", st)
	}
	_, err = plsClient.UpdatePrivateEndpointConnection(v.ctx, testRG, "testPls", aliasConn, armnetwork.PrivateEndpointConnection{
		Properties: &armnetwork.PrivateEndpointConnectionProperties{PrivateLinkServiceConnectionState: &armnetwork.PrivateLinkServiceConnectionState{Status: ptr("Pending")}}}, nil)
	wantCode(t, err, 400, "InvalidPrivateEndpointConnectionStatus")
	_, err = plsClient.UpdatePrivateEndpointConnection(v.ctx, testRG, "testPls", "nope", approve, nil)
	wantCode(t, err, 404, "NotFound")

	// The service cannot go while it has connections.
	_, err = plsClient.BeginDelete(v.ctx, testRG, "testPls", nil)
	wantCode(t, err, 400, "PrivateLinkServiceWithPrivateEndpointConnectionsCannotBeDeleted")

	// The owner removes a connection: the endpoint stays, Disconnected.
	dp, err := plsClient.BeginDeletePrivateEndpointConnection(v.ctx, testRG, "testPls", connName, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dp.PollUntilDone(v.ctx, fastPoll); err != nil {
		t.Fatal(err)
	}
	if st := stateOf(b.get(v, "testPe")); st != StateDisconnected {
		t.Fatalf("endpoint after removal: %s", st)
	}
	if again, err := b.put(v, "testPe", b.get(v, "testPe")); err != nil || stateOf(again) != StateDisconnected {
		t.Fatalf("a removed connection does not come back by itself: %v", err)
	}
	// The consumer deletes its endpoints: the service's connections, the
	// interfaces and the addresses go.
	for _, del := range []struct {
		c    consumerNet
		name string
	}{{b, "testPe"}, {b, "byAlias"}, {c, "auto"}} {
		p, err := del.c.net.NewPrivateEndpointsClient().BeginDelete(v.ctx, "consumer", del.name, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.PollUntilDone(v.ctx, fastPoll); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := plsClient.Get(v.ctx, testRG, "testPls", nil); len(got.Properties.PrivateEndpointConnections) != 0 {
		t.Fatalf("connections left %+v", got.Properties.PrivateEndpointConnections)
	}
	if _, err := b.net.NewInterfacesClient().Get(v.ctx, "consumer", *nic.Name, nil); respErr(t, err).StatusCode != 404 {
		t.Fatal("endpoint interface left behind")
	}
	if sn, _ := b.net.NewSubnetsClient().Get(v.ctx, "consumer", "cvnet", "pe", nil); len(sn.Properties.PrivateEndpoints) != 0 || len(sn.Properties.IPConfigurations) != 0 {
		t.Fatalf("consumer subnet still used %+v", sn.Properties)
	}
	dpls, err := plsClient.BeginDelete(v.ctx, testRG, "testPls", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dpls.PollUntilDone(v.ctx, fastPoll); err != nil {
		t.Fatal(err)
	}
}

func TestPrivateLinkServiceVisibilityActions(t *testing.T) {
	v := newPLSEnv(t, arm.Config{}, 2)
	body := plsBody(v.fe[0], v.natSubnet)
	body.Properties.Visibility = &armnetwork.PrivateLinkServicePropertiesVisibility{Subscriptions: []*string{ptr(subB)}}
	body.Properties.AutoApproval = &armnetwork.PrivateLinkServicePropertiesAutoApproval{Subscriptions: []*string{ptr(subC)}}
	pls := v.mustPLS("pls", body)
	star := plsBody(v.fe[1], v.natSubnet)
	star.Properties.Visibility = &armnetwork.PrivateLinkServicePropertiesVisibility{Subscriptions: []*string{ptr("*")}}
	open := v.mustPLS("open", star)
	check := func(sub, alias string) bool {
		t.Helper()
		f, _ := v.consumer(sub)
		p, err := f.NewPrivateLinkServicesClient().BeginCheckPrivateLinkServiceVisibility(v.ctx, testLoc,
			armnetwork.CheckPrivateLinkServiceVisibilityRequest{PrivateLinkServiceAlias: &alias}, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := p.PollUntilDone(v.ctx, fastPoll)
		if err != nil {
			t.Fatal(err)
		}
		return *res.Visible
	}
	for _, c := range []struct {
		sub, alias string
		want       bool
	}{
		{testSub, *pls.Properties.Alias, true}, {subB, *pls.Properties.Alias, true}, {subC, *pls.Properties.Alias, true},
		{subD, *pls.Properties.Alias, false}, {subD, *open.Properties.Alias, true}, {subB, "missing.alias", false},
	} {
		if got := check(c.sub, c.alias); got != c.want {
			t.Errorf("visible(%s, %s) = %v", c.sub, c.alias, got)
		}
	}
	f, _ := v.consumer(subC)
	pager := f.NewPrivateLinkServicesClient().NewListAutoApprovedPrivateLinkServicesPager(testLoc, nil)
	var ids []string
	for pager.More() {
		page, err := pager.NextPage(v.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range page.Value {
			ids = append(ids, *a.PrivateLinkService)
		}
	}
	if len(ids) != 1 || ids[0] != *pls.ID {
		t.Fatalf("auto-approved list %v", ids)
	}
	resp := v.raw(http.MethodPost, "/subscriptions/"+subB+"/providers/Microsoft.Network/locations/eastus/checkPrivateLinkServiceVisibility", `{}`, nil)
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 400 || recordings.ErrorCode(b) != "MissingApiVersionParameter" {
		t.Fatalf("no api-version: %d %s", resp.StatusCode, b)
	}
	resp = v.raw(http.MethodPost, "/subscriptions/"+subB+"/resourceGroups/nope/providers/Microsoft.Network/locations/eastus/checkPrivateLinkServiceVisibility?api-version="+apiVersion, `{"privateLinkServiceAlias":"x"}`, nil)
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 404 || recordings.ErrorCode(b) != "ResourceGroupNotFound" {
		t.Fatalf("missing group: %d %s", resp.StatusCode, b)
	}
}

// TestPrivateLinkSnapshot checks that a restored engine keeps the links
// between endpoints and services (private state included).
func TestPrivateLinkSnapshot(t *testing.T) {
	v := newPLSEnv(t, arm.Config{}, 1)
	body := plsBody(v.fe[0], v.natSubnet)
	body.Properties.Visibility = &armnetwork.PrivateLinkServicePropertiesVisibility{Subscriptions: []*string{ptr(subB)}}
	pls := v.mustPLS("pls", body)
	b := v.consumerNet(subB)
	if _, err := b.put(v, "pe", endpointBody(b.subnet, *pls.ID, true)); err != nil {
		t.Fatal(err)
	}
	snap, err := v.engine.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := v.engine.Restore(snap); err != nil {
		t.Fatal(err)
	}
	got, _ := v.net.NewPrivateLinkServicesClient().Get(v.ctx, testRG, "pls", nil)
	name := *got.Properties.PrivateEndpointConnections[0].Name
	if _, err := v.net.NewPrivateLinkServicesClient().UpdatePrivateEndpointConnection(v.ctx, testRG, "pls", name, armnetwork.PrivateEndpointConnection{
		Properties: &armnetwork.PrivateEndpointConnectionProperties{PrivateLinkServiceConnectionState: &armnetwork.PrivateLinkServiceConnectionState{Status: ptr("Approved")}}}, nil); err != nil {
		t.Fatal(err)
	}
	if st := stateOf(b.get(v, "pe")); st != StateApproved {
		t.Fatalf("after restore and approval: %s", st)
	}
	raw := v.rawJSON("/subscriptions/" + subB + "/resourceGroups/consumer/providers/Microsoft.Network/privateEndpoints/pe")
	for k := range raw {
		if strings.HasPrefix(k, arm.PrivatePrefix) {
			t.Fatalf("private key %s sent to a client", k)
		}
	}
}

func armresourcesGroup(location string) armresources.ResourceGroup {
	return armresources.ResourceGroup{Location: &location}
}
