package middleware

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

const sub = "/subscriptions/s1"
const rgNet = sub + "/resourceGroups/rg/providers/Microsoft.Network"

func TestRoleAction(t *testing.T) {
	for _, c := range []struct{ method, path, want string }{
		{"GET", rgNet + "/loadBalancers/lb", "Microsoft.Network/loadBalancers/read"},
		{"GET", rgNet + "/loadBalancers", "Microsoft.Network/loadBalancers/read"},
		{"PUT", rgNet + "/loadBalancers/lb/backendAddressPools/p", "Microsoft.Network/loadBalancers/backendAddressPools/write"},
		{"PATCH", sub + "/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/ss", "Microsoft.Compute/virtualMachineScaleSets/write"},
		{"DELETE", rgNet + "/publicIPAddresses/pip", "Microsoft.Network/publicIPAddresses/delete"},
		{"POST", rgNet + "/serviceGateways/sg/updateServices", "Microsoft.Network/serviceGateways/updateServices/action"},
		{"GET", sub + "/providers/Microsoft.Compute", "Microsoft.Resources/subscriptions/providers/read"},
		{"GET", sub + "/resourceGroups/rg", "Microsoft.Resources/subscriptions/resourceGroups/read"},
		{"GET", sub + "/providers/Microsoft.Network/locations/eastus/operations/x", ""},
		{"GET", sub + "/providers/Microsoft.Compute/locations/eastus/operationResults/x", ""},
		{"GET", sub + "/providers/Microsoft.Compute/locations/eastus/DiskOperations/x", ""},
		{"GET", sub + "/providers/Microsoft.Network/locations/eastus/asyncoperations/x", ""},
		{"POST", "/common/oauth2/token", ""},
	} {
		op := Classify(httptest.NewRequest(c.method, "https://azsim"+c.path, nil))
		if got := op.RoleAction(); got != c.want {
			t.Errorf("%s %s: %q, want %q", c.method, c.path, got, c.want)
		}
	}
}

func TestLinkedActions(t *testing.T) {
	lb := rgNet + "/loadBalancers/kubernetes"
	for name, c := range map[string]struct {
		path, body string
		want       []string
	}{
		"load balancer: public frontend, own rules, back-references from a GET": {lb, `{"properties":{
			"frontendIPConfigurations":[{"id":"` + lb + `/frontendIPConfigurations/fe","name":"fe","properties":{
				"publicIPAddress":{"id":"` + rgNet + `/publicIPAddresses/pip"},"loadBalancingRules":[{"id":"` + lb + `/loadBalancingRules/r"}]}}],
			"backendAddressPools":[{"name":"kubernetes","properties":{"backendIPConfigurations":[{"id":"` + rgNet + `/networkInterfaces/nic/ipConfigurations/ipc"}],
				"loadBalancerBackendAddresses":[{"name":"a","properties":{"ipAddress":"10.0.0.4","virtualNetwork":{"id":"` + rgNet + `/virtualNetworks/vnet"},
					"networkInterfaceIPConfiguration":{"id":"` + rgNet + `/networkInterfaces/nic/ipConfigurations/ipc"}}}]}}],
			"loadBalancingRules":[{"name":"r","properties":{"frontendIPConfiguration":{"id":"` + lb + `/frontendIPConfigurations/fe"}}}]}}`,
			[]string{"Microsoft.Network/publicIPAddresses/join/action", "Microsoft.Network/virtualNetworks/joinLoadBalancer/action"}},
		"internal frontend": {lb, `{"properties":{"frontendIPConfigurations":[{"name":"fe","properties":{"subnet":{"id":"` + rgNet + `/virtualNetworks/vnet/subnets/s"}}}]}}`,
			[]string{"Microsoft.Network/virtualNetworks/subnets/join/action"}},
		"NIC joining a pool": {rgNet + "/networkInterfaces/nic", `{"properties":{"networkSecurityGroup":{"id":"` + rgNet + `/networkSecurityGroups/nsg"},
			"virtualMachine":{"id":"/subscriptions/s1/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm"},
			"ipConfigurations":[{"id":"` + rgNet + `/networkInterfaces/nic/ipConfigurations/ipc","name":"ipc","properties":{
				"subnet":{"id":"` + rgNet + `/virtualNetworks/vnet/subnets/s"},"loadBalancerBackendAddressPools":[{"id":"` + lb + `/backendAddressPools/kubernetes"}]}}]}}`,
			[]string{"Microsoft.Network/loadBalancers/backendAddressPools/join/action", "Microsoft.Network/networkSecurityGroups/join/action",
				"Microsoft.Network/virtualNetworks/subnets/join/action"}},
		"public IP from a prefix, echoing its configuration": {rgNet + "/publicIPAddresses/pip", `{"properties":{"publicIPPrefix":{"id":"` + rgNet + `/publicIPPrefixes/pfx"},
			"ipConfiguration":{"id":"` + lb + `/frontendIPConfigurations/fe"}}}`, []string{"Microsoft.Network/publicIPPrefixes/join/action"}},
		"not JSON": {lb, `{`, nil},
	} {
		t.Run(name, func(t *testing.T) {
			op := Classify(httptest.NewRequest(http.MethodPut, "https://azsim"+c.path, nil))
			got := LinkedActions(op, c.path, []byte(c.body))
			if len(got) == 0 {
				got = nil
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
	if got := LinkedActions(Classify(httptest.NewRequest(http.MethodGet, "https://azsim"+lb, nil)), lb, []byte(`{"id":"x"}`)); got != nil {
		t.Errorf("a GET needs no join: %v", got)
	}
}

// The middleware counts the role actions of authenticated requests by the program named in
// the User-Agent; refused requests need none.
func TestRoleActionsCountedPerClient(t *testing.T) {
	m, _, _, _ := newTestMiddleware(Options{Authorize: func(r *http.Request) error {
		if r.Header.Get("Authorization") == "" {
			return errUnauthenticated
		}
		return nil
	}})
	send := func(ua, method, path, body string, auth bool) {
		req := httptest.NewRequest(method, "https://azsim"+path+"?api-version=2024-05-01", strings.NewReader(body))
		req.Header.Set("User-Agent", ua)
		if auth {
			req.Header.Set("Authorization", "Bearer x")
		}
		m.ServeHTTP(httptest.NewRecorder(), req)
	}
	send("azure-ccm azsdk-go-armnetwork/v9.0.0 (go1.26; linux)", "PUT", rgNet+"/loadBalancers/lb",
		`{"properties":{"frontendIPConfigurations":[{"name":"f","properties":{"publicIPAddress":{"id":"`+rgNet+`/publicIPAddresses/p"}}}]}}`, true)
	send("azure-disk-provisioner azsdk-go-armcompute/v7", "DELETE", sub+"/resourceGroups/rg/providers/Microsoft.Compute/disks/d", "", true)
	send("azure-disk-provisioner azsdk-go-armcompute/v7", "DELETE", sub+"/resourceGroups/rg/providers/Microsoft.Compute/disks/d2", "", false)
	st := m.Stats()
	ccm, prov := st.RoleActionsOf("azure-ccm"), st.RoleActionsOf("azure-disk-provisioner")
	if !ccm["microsoft.network/loadbalancers/write"] || !ccm["microsoft.network/publicipaddresses/join/action"] || len(ccm) != 2 {
		t.Errorf("azure-ccm: %v", ccm)
	}
	if !prov["microsoft.compute/disks/delete"] || len(prov) != 1 {
		t.Errorf("azure-disk-provisioner: %v", prov)
	}
	for _, a := range st.RoleActions {
		if a.Client == "azure-disk-provisioner" && a.Count != 1 {
			t.Errorf("the refused request was counted: %+v", a)
		}
	}
}

var errUnauthenticated = errors.New("no token")
