package network

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v3"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/recordings"
)

// plsEnv is an engine with a provider network: a VNet with a load balancer
// subnet (lb), a NAT subnet with private link service network policies
// disabled (nat) and one with them enabled (natp), a Standard internal load
// balancer "lb" with frontends fe0…, and a Basic one "blb".
type plsEnv struct {
	*env
	lbSubnet, natSubnet, policySubnet string
	lbID, basicFE                     string
	fe                                []string
}

const apiVersion = "2025-05-01"

func newPLSEnv(t *testing.T, cfg arm.Config, frontends int) *plsEnv {
	t.Helper()
	v := &plsEnv{env: newEnv(t, cfg)}
	v.mustRG(testRG)
	body := vnetBody("10.0.0.0/16", "lb", "10.0.1.0/24", "nat", "10.0.2.0/24", "natp", "10.0.3.0/24")
	body.Properties.Subnets[1].Properties.PrivateLinkServiceNetworkPolicies = ptr(armnetwork.VirtualNetworkPrivateLinkServiceNetworkPoliciesDisabled)
	p, err := v.net.NewVirtualNetworksClient().BeginCreateOrUpdate(v.ctx, testRG, "vnet", body, nil)
	if err != nil {
		t.Fatal(err)
	}
	vn, err := p.PollUntilDone(v.ctx, fastPoll)
	if err != nil {
		t.Fatal(err)
	}
	v.lbSubnet, v.natSubnet, v.policySubnet = *vn.Properties.Subnets[0].ID, *vn.Properties.Subnets[1].ID, *vn.Properties.Subnets[2].ID
	lb := armnetwork.LoadBalancer{SKU: &armnetwork.LoadBalancerSKU{Name: ptr(armnetwork.LoadBalancerSKUNameStandard)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{}}
	for i := 0; i < frontends; i++ {
		lb.Properties.FrontendIPConfigurations = append(lb.Properties.FrontendIPConfigurations, &armnetwork.FrontendIPConfiguration{
			Name: ptr(fmt.Sprintf("fe%d", i)), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{Subnet: &armnetwork.Subnet{ID: &v.lbSubnet}}})
	}
	got, err := v.putLB("lb", lb)
	if err != nil {
		t.Fatal(err)
	}
	v.lbID = *got.ID
	for _, fe := range got.Properties.FrontendIPConfigurations {
		v.fe = append(v.fe, *fe.ID)
	}
	basic, err := v.putLB("blb", armnetwork.LoadBalancer{SKU: &armnetwork.LoadBalancerSKU{Name: ptr(armnetwork.LoadBalancerSKUNameBasic)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{
			Name: ptr("bfe"), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{Subnet: &armnetwork.Subnet{ID: &v.lbSubnet}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	v.basicFE = *basic.Properties.FrontendIPConfigurations[0].ID
	return v
}

// plsBody is a private link service on frontend fe with one NAT IP
// configuration per entry of ips in subnet ("" = dynamic).
func plsBody(fe, subnet string, ips ...string) armnetwork.PrivateLinkService {
	pls := armnetwork.PrivateLinkService{Location: ptr(testLoc), Properties: &armnetwork.PrivateLinkServiceProperties{
		LoadBalancerFrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{ID: &fe}}}}
	if len(ips) == 0 {
		ips = []string{""}
	}
	for i, ip := range ips {
		c := &armnetwork.PrivateLinkServiceIPConfiguration{Name: ptr(fmt.Sprintf("nat%d", i)), Properties: &armnetwork.PrivateLinkServiceIPConfigurationProperties{
			Subnet: &armnetwork.Subnet{ID: &subnet}, Primary: ptr(i == 0), PrivateIPAllocationMethod: ptr(armnetwork.IPAllocationMethodDynamic)}}
		if ip != "" {
			c.Properties.PrivateIPAllocationMethod, c.Properties.PrivateIPAddress = ptr(armnetwork.IPAllocationMethodStatic), ptr(ip)
		}
		pls.Properties.IPConfigurations = append(pls.Properties.IPConfigurations, c)
	}
	return pls
}

func (v *plsEnv) putPLS(name string, pls armnetwork.PrivateLinkService) (armnetwork.PrivateLinkService, error) {
	v.t.Helper()
	p, err := v.net.NewPrivateLinkServicesClient().BeginCreateOrUpdate(v.ctx, testRG, name, pls, nil)
	if err != nil {
		return armnetwork.PrivateLinkService{}, err
	}
	res, err := p.PollUntilDone(v.ctx, fastPoll)
	return res.PrivateLinkService, err
}

func (v *plsEnv) mustPLS(name string, pls armnetwork.PrivateLinkService) armnetwork.PrivateLinkService {
	v.t.Helper()
	got, err := v.putPLS(name, pls)
	if err != nil {
		v.t.Fatalf("create private link service %s: %v", name, err)
	}
	return got
}

// rawJSON GETs a resource and decodes its body.
func (v *env) rawJSON(id string) map[string]any {
	v.t.Helper()
	resp := v.raw(http.MethodGet, id+"?api-version="+apiVersion, "", nil)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		v.t.Fatalf("GET %s: %d %s", id, resp.StatusCode, b)
	}
	doc, err := arm.DecodeDoc(b)
	if err != nil {
		v.t.Fatal(err)
	}
	return doc
}

func wantCode(t *testing.T, err error, status int, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("succeeded, want %d %s", status, code)
	}
	if re := respErr(t, err); re.StatusCode != status || re.ErrorCode != code {
		t.Fatalf("got %d %s (%v), want %d %s", re.StatusCode, re.ErrorCode, err, status, code)
	}
}

var guidPattern = `[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`

// TestPrivateLinkServiceCreateConformance drives the shape of the published
// PrivateLinkServiceCreate / Get examples through the SDK: request fields are
// kept, read-only fields (alias, networkInterfaces, privateEndpointConnections,
// provisioningState, etag, ipConfiguration IDs) are filled, and the implied
// network interface, subnet and load balancer references exist.
func TestPrivateLinkServiceCreateConformance(t *testing.T) {
	v := newPLSEnv(t, arm.Config{}, 1)
	body := plsBody(v.fe[0], v.natSubnet, "10.0.2.10")
	body.Properties.Visibility = &armnetwork.PrivateLinkServicePropertiesVisibility{Subscriptions: []*string{ptr("subscription1"), ptr("subscription2"), ptr("subscription3")}}
	body.Properties.AutoApproval = &armnetwork.PrivateLinkServicePropertiesAutoApproval{Subscriptions: []*string{ptr("subscription1"), ptr("subscription2")}}
	body.Properties.Fqdns = []*string{ptr("fqdn1"), ptr("fqdn2"), ptr("fqdn3")}
	body.Properties.IPConfigurations[0].Properties.PrivateIPAddressVersion = ptr(armnetwork.IPVersionIPv4)
	body.Tags = map[string]*string{"k8s-azure-owner-service": ptr("default/svc")}
	lbBefore := v.getLB("lb")

	// Status codes and polling headers of the create, raw. NRP writes carry their ETag in the
	// body only (as recorded), so no ETag header is expected.
	b, _ := json.Marshal(body)
	plsPath := "/subscriptions/" + testSub + "/resourceGroups/" + testRG + "/providers/Microsoft.Network/privateLinkServices/testPls"
	resp := v.raw(http.MethodPut, plsPath+"?api-version="+apiVersion, string(b), nil)
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Azure-AsyncOperation") == "" || resp.Header.Get("ETag") != "" {
		t.Fatalf("create: %d async=%q etag=%q", resp.StatusCode, resp.Header.Get("Azure-AsyncOperation"), resp.Header.Get("ETag"))
	}
	pls, err := v.net.NewPrivateLinkServicesClient().Get(v.ctx, testRG, "testPls", nil)
	if err != nil {
		t.Fatal(err)
	}
	p := pls.Properties
	if *pls.ID != plsPath || *pls.Name != "testPls" || *pls.Type != "Microsoft.Network/privateLinkServices" || *pls.Location != testLoc ||
		!regexp.MustCompile(`^W/"`+guidPattern+`"$`).MatchString(*pls.Etag) || *pls.Tags["k8s-azure-owner-service"] != "default/svc" {
		t.Fatalf("envelope %s %s %s %s %s", *pls.ID, *pls.Name, *pls.Type, *pls.Location, *pls.Etag)
	}
	if *p.ProvisioningState != armnetwork.ProvisioningStateSucceeded || len(p.Visibility.Subscriptions) != 3 || len(p.AutoApproval.Subscriptions) != 2 ||
		len(p.Fqdns) != 3 || *p.EnableProxyProtocol || p.PrivateEndpointConnections == nil || len(p.PrivateEndpointConnections) != 0 {
		t.Fatalf("properties %+v", p)
	}
	if !regexp.MustCompile(`^testpls\.` + guidPattern + `\.eastus\.azure\.privatelinkservice$`).MatchString(*p.Alias) {
		t.Fatalf("alias %s", *p.Alias)
	}
	if len(p.LoadBalancerFrontendIPConfigurations) != 1 || *p.LoadBalancerFrontendIPConfigurations[0].ID != v.fe[0] || p.LoadBalancerFrontendIPConfigurations[0].Properties != nil {
		t.Fatalf("frontends %+v", p.LoadBalancerFrontendIPConfigurations)
	}
	ipc := p.IPConfigurations[0]
	if *ipc.ID != plsPath+"/ipConfigurations/nat0" || *ipc.Type != "Microsoft.Network/privateLinkServices/ipConfigurations" || *ipc.Etag != *pls.Etag ||
		*ipc.Properties.PrivateIPAddress != "10.0.2.10" || *ipc.Properties.PrivateIPAllocationMethod != armnetwork.IPAllocationMethodStatic ||
		*ipc.Properties.PrivateIPAddressVersion != armnetwork.IPVersionIPv4 || *ipc.Properties.Subnet.ID != v.natSubnet || !*ipc.Properties.Primary ||
		*ipc.Properties.ProvisioningState != armnetwork.ProvisioningStateSucceeded {
		t.Fatalf("ip configuration %+v %+v", ipc, ipc.Properties)
	}

	// The network interface NRP creates: <name>.nic.<guid>, read-only, in the subnet.
	if len(p.NetworkInterfaces) != 1 || !regexp.MustCompile(`/resourceGroups/rg1/providers/Microsoft.Network/networkInterfaces/testPls\.nic\.`+guidPattern+`$`).MatchString(*p.NetworkInterfaces[0].ID) {
		t.Fatalf("networkInterfaces %+v", p.NetworkInterfaces)
	}
	nicID := *p.NetworkInterfaces[0].ID
	nicName := nicID[strings.LastIndex(nicID, "/")+1:]
	nic, err := v.net.NewInterfacesClient().Get(v.ctx, testRG, nicName, nil)
	if err != nil {
		t.Fatal(err)
	}
	if *nic.Properties.PrivateLinkService.ID != plsPath || *nic.Properties.IPConfigurations[0].Properties.PrivateIPAddress != "10.0.2.10" ||
		*nic.Properties.IPConfigurations[0].Properties.Subnet.ID != v.natSubnet {
		t.Fatalf("nic %+v", nic.Properties)
	}
	sn, err := v.net.NewSubnetsClient().Get(v.ctx, testRG, "vnet", "nat", nil)
	if err != nil || len(sn.Properties.IPConfigurations) != 1 || *sn.Properties.IPConfigurations[0].ID != *nic.Properties.IPConfigurations[0].ID {
		t.Fatalf("subnet ipConfigurations %v %+v", err, sn.Properties.IPConfigurations)
	}
	_, err = v.net.NewInterfacesClient().BeginCreateOrUpdate(v.ctx, testRG, nicName, nic.Interface, nil)
	wantCode(t, err, 400, "CannotModifyNicAttachedToPrivateLinkService")
	_, err = v.net.NewInterfacesClient().BeginDelete(v.ctx, testRG, nicName, nil)
	wantCode(t, err, 400, "NicInUse")

	// The load balancer frontend refers back to the service; its etag moved.
	lbAfter := v.getLB("lb")
	if *lbAfter.Etag == *lbBefore.Etag {
		t.Fatal("load balancer etag did not change")
	}
	if got := refID(arm.Props(arm.Arr(v.rawJSON(v.lbID), "properties", "frontendIPConfigurations")[0]), "privateLinkService"); got != plsPath {
		t.Fatalf("frontend privateLinkService = %q", got)
	}
	// A load balancer PUT answers with the reference, and nothing changes after it.
	lbJSON, _ := json.Marshal(lbAfter)
	resp = v.raw(http.MethodPut, v.lbID+"?api-version="+apiVersion, string(lbJSON), nil)
	putBody, _ := io.ReadAll(resp.Body)
	putDoc, _ := arm.DecodeDoc(putBody)
	if got := refID(arm.Props(arm.Arr(putDoc, "properties", "frontendIPConfigurations")[0]), "privateLinkService"); resp.StatusCode != 200 || got != plsPath {
		t.Fatalf("LB PUT: %d frontend privateLinkService = %q", resp.StatusCode, got)
	}
	if again := v.getLB("lb"); *again.Etag != arm.Str(putDoc, "etag") {
		t.Fatal("a derived field changed after the load balancer PUT")
	}

	// Update: 200, alias and interface kept, etag renewed; If-Match is honoured.
	body.Properties.Fqdns = []*string{ptr("svc.example.com")}
	body.Properties.EnableProxyProtocol = ptr(true)
	b, _ = json.Marshal(body)
	resp = v.raw(http.MethodPut, plsPath+"?api-version="+apiVersion, string(b), map[string]string{"If-Match": *pls.Etag})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("update: %d", resp.StatusCode)
	}
	upd, _ := v.net.NewPrivateLinkServicesClient().Get(v.ctx, testRG, "testPls", nil)
	if *upd.Properties.Alias != *p.Alias || *upd.Properties.NetworkInterfaces[0].ID != nicID || *upd.Etag == *pls.Etag ||
		!*upd.Properties.EnableProxyProtocol || len(upd.Properties.Fqdns) != 1 {
		t.Fatalf("after update %+v", upd.Properties)
	}
	resp = v.raw(http.MethodPut, plsPath+"?api-version="+apiVersion, string(b), map[string]string{"If-Match": *pls.Etag})
	if resp.StatusCode != http.StatusPreconditionFailed {
		t.Fatalf("stale If-Match: %d", resp.StatusCode)
	}
	resp = v.raw(http.MethodPut, plsPath+"?api-version="+apiVersion, string(b), map[string]string{"If-None-Match": "*"})
	if resp.StatusCode != http.StatusPreconditionFailed {
		t.Fatalf("If-None-Match *: %d", resp.StatusCode)
	}
	// Read-only fields sent by a client (a GET echoed back) are ignored.
	echo := upd.PrivateLinkService
	echo.Properties.Alias = ptr("forged.alias")
	if got, err := v.putPLS("testPls", echo); err != nil || *got.Properties.Alias != *p.Alias {
		t.Fatalf("echo PUT: %v", err)
	}

	// Delete: 202 + Location; the interface, the address and the frontend reference go.
	resp = v.raw(http.MethodDelete, plsPath+"?api-version="+apiVersion, "", nil)
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get("Location") == "" {
		t.Fatalf("delete: %d", resp.StatusCode)
	}
	if _, err := v.net.NewPrivateLinkServicesClient().Get(v.ctx, testRG, "testPls", nil); respErr(t, err).StatusCode != 404 {
		t.Fatal("not deleted")
	}
	if _, err := v.net.NewInterfacesClient().Get(v.ctx, testRG, nicName, nil); respErr(t, err).StatusCode != 404 {
		t.Fatal("interface left behind")
	}
	if got := refID(arm.Props(arm.Arr(v.rawJSON(v.lbID), "properties", "frontendIPConfigurations")[0]), "privateLinkService"); got != "" {
		t.Fatalf("frontend still refers to %s", got)
	}
	_ = v.engine.Do(func(tx *arm.Tx) error {
		if ips := tx.IPsInSpace(subnetSpace(v.natSubnet)); len(ips) != 0 {
			t.Errorf("NAT addresses not released: %v", ips)
		}
		return nil
	})
}

func TestPrivateLinkServiceValidation(t *testing.T) {
	v := newPLSEnv(t, arm.Config{}, 2)
	cases := []struct {
		name string
		mod  func(*armnetwork.PrivateLinkService)
		code string
	}{
		{"basic load balancer", func(p *armnetwork.PrivateLinkService) {
			p.Properties.LoadBalancerFrontendIPConfigurations[0].ID = &v.basicFE
		}, "PrivateLinkServiceRequiresStandardSkuLoadBalancer"},
		{"two frontends", func(p *armnetwork.PrivateLinkService) {
			p.Properties.LoadBalancerFrontendIPConfigurations = append(p.Properties.LoadBalancerFrontendIPConfigurations, &armnetwork.FrontendIPConfiguration{ID: &v.fe[1]})
		}, "InvalidNumberOfPrivateLinkServiceLoadBalancerFrontendIpConfigurationsSpecified"},
		{"no frontend", func(p *armnetwork.PrivateLinkService) {
			p.Properties.LoadBalancerFrontendIPConfigurations = nil
		}, "InvalidNumberOfPrivateLinkServiceLoadBalancerFrontendIpConfigurationsSpecified"},
		{"missing frontend", func(p *armnetwork.PrivateLinkService) {
			p.Properties.LoadBalancerFrontendIPConfigurations[0].ID = ptr(v.lbID + "/frontendIPConfigurations/nope")
		}, "InvalidResourceReference"},
		{"subnet with network policies", func(p *armnetwork.PrivateLinkService) {
			p.Properties.IPConfigurations[0].Properties.Subnet.ID = &v.policySubnet
		}, "PrivateLinkServiceCannotBeCreatedInSubnetThatHasNetworkPoliciesEnabled"},
		{"missing subnet", func(p *armnetwork.PrivateLinkService) {
			p.Properties.IPConfigurations[0].Properties.Subnet.ID = ptr(v.natSubnet + "x")
		}, "InvalidResourceReference"},
		{"static outside the subnet", func(p *armnetwork.PrivateLinkService) {
			c := p.Properties.IPConfigurations[0].Properties
			c.PrivateIPAllocationMethod, c.PrivateIPAddress = ptr(armnetwork.IPAllocationMethodStatic), ptr("10.0.9.10")
		}, "PrivateIPAddressNotInSubnet"},
		{"static in a subnet's reserved range", func(p *armnetwork.PrivateLinkService) {
			c := p.Properties.IPConfigurations[0].Properties
			c.PrivateIPAllocationMethod, c.PrivateIPAddress = ptr(armnetwork.IPAllocationMethodStatic), ptr("10.0.2.1")
		}, "PrivateIPAddressNotInSubnet"},
		{"static without address", func(p *armnetwork.PrivateLinkService) {
			p.Properties.IPConfigurations[0].Properties.PrivateIPAllocationMethod = ptr(armnetwork.IPAllocationMethodStatic)
		}, "PrivateIPAddressIsNotSpecified"},
		{"no ip configuration", func(p *armnetwork.PrivateLinkService) {
			p.Properties.IPConfigurations = nil
		}, "InvalidNumberOfPrivateLinkServiceIpConfigurations"},
		{"nine ip configurations", func(p *armnetwork.PrivateLinkService) {
			*p = plsBody(v.fe[0], v.natSubnet, "", "", "", "", "", "", "", "", "")
		}, "InvalidNumberOfPrivateLinkServiceIpConfigurations"},
		{"two primaries", func(p *armnetwork.PrivateLinkService) {
			*p = plsBody(v.fe[0], v.natSubnet, "", "")
			p.Properties.IPConfigurations[1].Properties.Primary = ptr(true)
		}, "PrivateLinkServiceMustHaveExactlyOnePrimaryIpConfiguration"},
		{"direct connect", func(p *armnetwork.PrivateLinkService) {
			p.Properties.DestinationIPAddress = ptr("10.0.1.50")
		}, "SubscriptionNotRegisteredForFeature"},
		{"no location", func(p *armnetwork.PrivateLinkService) {
			p.Location = nil
		}, "LocationRequired"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := plsBody(v.fe[0], v.natSubnet)
			c.mod(&body)
			_, err := v.putPLS("bad", body)
			wantCode(t, err, 400, c.code)
		})
	}
	// A static address already held in the NAT subnet.
	v.mustPLS("first", plsBody(v.fe[0], v.natSubnet, "10.0.2.20"))
	_, err := v.putPLS("second", plsBody(v.fe[1], v.natSubnet, "10.0.2.20"))
	wantCode(t, err, 400, "PrivateIPAddressInUse")
	// Nothing was created by the refused requests.
	pager := v.net.NewPrivateLinkServicesClient().NewListPager(testRG, nil)
	n := 0
	for pager.More() {
		page, err := pager.NextPage(v.ctx)
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.Value)
	}
	if n != 1 {
		t.Fatalf("%d private link services after refused requests", n)
	}
}

func TestPrivateLinkServiceLimitsAndReferences(t *testing.T) {
	v := newPLSEnv(t, arm.Config{}, 10)
	for i := 0; i < MaxPrivateLinkServicesPerLoadBalancer; i++ {
		v.mustPLS(fmt.Sprintf("pls%d", i), plsBody(v.fe[i], v.natSubnet))
	}
	_, err := v.putPLS("pls8", plsBody(v.fe[8], v.natSubnet))
	wantCode(t, err, 400, "PrivateLinkServiceCountPerLoadBalancerLimitReached")
	// Updating one of the eight is no new service.
	if _, err := v.putPLS("pls7", plsBody(v.fe[7], v.natSubnet, "10.0.2.99")); err != nil {
		t.Fatal(err)
	}
	// A frontend serves one service; another frontend of the same load
	// balancer may be chosen, one of another load balancer may not.
	_, err = v.putPLS("pls0", plsBody(v.fe[1], v.natSubnet))
	wantCode(t, err, 400, "LoadBalancerFrontendIPConfigurationAlreadyUsedByPrivateLinkService")
	if _, err := v.putPLS("pls0", plsBody(v.fe[9], v.natSubnet)); err != nil {
		t.Fatal(err)
	}
	lb2, err := v.putLB("lb2", armnetwork.LoadBalancer{SKU: &armnetwork.LoadBalancerSKU{Name: ptr(armnetwork.LoadBalancerSKUNameStandard)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{
			Name: ptr("fe"), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{Subnet: &armnetwork.Subnet{ID: &v.lbSubnet}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = v.putPLS("pls0", plsBody(*lb2.Properties.FrontendIPConfigurations[0].ID, v.natSubnet))
	wantCode(t, err, 400, "PrivateLinkServiceLoadBalancerCannotBeChanged")

	// The load balancer cannot lose a frontend in use, by PUT or child DELETE, nor be deleted.
	lb := v.getLB("lb")
	fes := lb.Properties.FrontendIPConfigurations
	lb.Properties.FrontendIPConfigurations = append(fes[:1:1], fes[2:]...) // drops fe1, which pls1 uses
	_, err = v.putLB("lb", lb)
	wantCode(t, err, 400, "LoadBalancerFrontendIPConfigurationInUseByPrivateLinkService")
	_, err = v.net.NewLoadBalancerFrontendIPConfigurationsClient().Get(v.ctx, testRG, "lb", "fe1", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp := v.raw(http.MethodDelete, v.fe[1]+"?api-version="+apiVersion, "", nil)
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 400 || recordings.ErrorCode(b) != "LoadBalancerFrontendIPConfigurationInUseByPrivateLinkService" {
		t.Fatalf("child delete: %d %s", resp.StatusCode, b)
	}
	_, err = v.net.NewLoadBalancersClient().BeginDelete(v.ctx, testRG, "lb", nil)
	wantCode(t, err, 400, "CannotDeleteLoadBalancerWithPrivateLinkService")
	// A frontend without a service can go.
	resp = v.raw(http.MethodDelete, v.fe[8]+"?api-version="+apiVersion, "", nil)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("delete unused frontend: %d", resp.StatusCode)
	}

	// The NAT subnet keeps its policies disabled and cannot be deleted while in use.
	sn, err := v.net.NewSubnetsClient().Get(v.ctx, testRG, "vnet", "nat", nil)
	if err != nil {
		t.Fatal(err)
	}
	sn.Properties.PrivateLinkServiceNetworkPolicies = ptr(armnetwork.VirtualNetworkPrivateLinkServiceNetworkPoliciesEnabled)
	_, err = v.net.NewSubnetsClient().BeginCreateOrUpdate(v.ctx, testRG, "vnet", "nat", sn.Subnet, nil)
	wantCode(t, err, 400, "PrivateLinkServiceNetworkPoliciesCannotBeEnabledOnPrivateLinkServiceSubnet")
	_, err = v.net.NewSubnetsClient().BeginDelete(v.ctx, testRG, "vnet", "nat", nil)
	wantCode(t, err, 400, "InUseSubnetCannotBeDeleted")
	// Disabling policies on another subnet (what a CCM does before creating) is
	// a plain subnet PUT; a service can then move its NAT addresses there.
	other, _ := v.net.NewSubnetsClient().Get(v.ctx, testRG, "vnet", "natp", nil)
	other.Properties.PrivateLinkServiceNetworkPolicies = ptr(armnetwork.VirtualNetworkPrivateLinkServiceNetworkPoliciesDisabled)
	sp, err := v.net.NewSubnetsClient().BeginCreateOrUpdate(v.ctx, testRG, "vnet", "natp", other.Subnet, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sp.PollUntilDone(v.ctx, fastPoll); err != nil {
		t.Fatal(err)
	}
	moved, err := v.putPLS("pls1", plsBody(v.fe[1], v.policySubnet))
	if err != nil || !strings.HasPrefix(*moved.Properties.IPConfigurations[0].Properties.PrivateIPAddress, "10.0.3.") {
		t.Fatalf("move NAT subnet: %v", err)
	}
}

// steppingClock advances by step on every reading while stepping is on, so
// that fixtures finish their operations; tests then drive it by hand.
type steppingClock struct {
	clock
	stepping bool
}

func (c *steppingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stepping {
		c.t = c.t.Add(time.Minute)
	}
	return c.t
}

func (c *steppingClock) step(on bool) { c.mu.Lock(); c.stepping = on; c.mu.Unlock() }

func TestPrivateLinkServiceListPagingAndLRO(t *testing.T) {
	clk := &steppingClock{clock: clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, stepping: true}
	v := newPLSEnv(t, arm.Config{PageSize: 2}, 3)
	for i := 0; i < 3; i++ {
		v.mustPLS(fmt.Sprintf("pls%d", i), plsBody(v.fe[i], v.natSubnet))
	}
	client := v.net.NewPrivateLinkServicesClient()
	count := func(more func() bool, next func() (int, error)) (n, pages int) {
		for more() {
			k, err := next()
			if err != nil {
				t.Fatal(err)
			}
			n, pages = n+k, pages+1
		}
		return
	}
	rg := client.NewListPager(testRG, nil)
	n, pages := count(rg.More, func() (int, error) { p, err := rg.NextPage(v.ctx); return len(p.Value), err })
	if n != 3 || pages != 2 {
		t.Fatalf("resource group list: %d in %d pages", n, pages)
	}
	all := client.NewListBySubscriptionPager(nil)
	n, pages = count(all.More, func() (int, error) { p, err := all.NextPage(v.ctx); return len(p.Value), err })
	if n != 3 || pages != 2 {
		t.Fatalf("subscription list: %d in %d pages", n, pages)
	}

	// With a slow operation the service shows Updating, then Succeeded.
	w := newPLSEnv(t, arm.Config{LRODuration: 10 * time.Second, Now: clk.Now}, 1)
	clk.step(false)
	poller, err := w.net.NewPrivateLinkServicesClient().BeginCreateOrUpdate(w.ctx, testRG, "slow", plsBody(w.fe[0], w.natSubnet), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := w.net.NewPrivateLinkServicesClient().Get(w.ctx, testRG, "slow", nil)
	if err != nil || *got.Properties.ProvisioningState != armnetwork.ProvisioningStateUpdating {
		t.Fatalf("during create: %v", err)
	}
	clk.Add(11 * time.Second)
	res, err := poller.PollUntilDone(w.ctx, fastPoll)
	if err != nil || *res.Properties.ProvisioningState != armnetwork.ProvisioningStateSucceeded {
		t.Fatalf("after create: %v", err)
	}
	// An injected failure ends the operation Failed; a retry repairs it.
	w.engine.FailNextLRO(func(i arm.LROInfo) bool { return i.Type == plsType }, &arm.Error{Code: "InternalServerError", Message: "injected"})
	fp, err := w.net.NewPrivateLinkServicesClient().BeginCreateOrUpdate(w.ctx, testRG, "slow", plsBody(w.fe[0], w.natSubnet), nil)
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(11 * time.Second)
	_, err = fp.PollUntilDone(w.ctx, fastPoll)
	if re := respErr(t, err); re.ErrorCode != "InternalServerError" {
		t.Fatalf("got %s", re.ErrorCode)
	}
	rp, err := w.net.NewPrivateLinkServicesClient().BeginCreateOrUpdate(w.ctx, testRG, "slow", plsBody(w.fe[0], w.natSubnet), nil)
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(11 * time.Second)
	if res, err := rp.PollUntilDone(w.ctx, fastPoll); err != nil || *res.Properties.ProvisioningState != armnetwork.ProvisioningStateSucceeded {
		t.Fatalf("retry: %v", err)
	}
}

// consumer returns a client factory and resource group client for another subscription.
func (v *env) consumer(sub string) (*armnetwork.ClientFactory, *armresources.ResourceGroupsClient) {
	v.t.Helper()
	f, err := armnetwork.NewClientFactory(sub, fakeCred{}, v.opts)
	if err != nil {
		v.t.Fatal(err)
	}
	rgs, err := armresources.NewResourceGroupsClient(sub, fakeCred{}, v.opts)
	if err != nil {
		v.t.Fatal(err)
	}
	return f, rgs
}

func TestChildTypesWithoutAPI(t *testing.T) {
	v := newPLSEnv(t, arm.Config{}, 1)
	v.mustPLS("pls", plsBody(v.fe[0], v.natSubnet))
	resp := v.raw(http.MethodGet, "/subscriptions/"+testSub+"/resourceGroups/"+testRG+"/providers/Microsoft.Network/privateLinkServices/pls/ipConfigurations/nat0?api-version="+apiVersion, "", nil)
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 400 || recordings.ErrorCode(b) != "InvalidResourceType" {
		t.Fatalf("GET of an ip configuration: %d %s", resp.StatusCode, b)
	}
	if _, ok := v.engine.GetResource("/subscriptions/" + testSub + "/resourceGroups/" + testRG + "/providers/Microsoft.Network/privateLinkServices/pls/ipConfigurations/nat0"); !ok {
		t.Fatal("engine does not find the ip configuration")
	}
}
