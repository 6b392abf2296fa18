package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/azure-ccm/azure-ccm/internal/azsim/server"
)

func TestClientCommands(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := server.Start(ctx, server.Options{IMDSAddr: "off"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	t.Setenv("AZSIM_URL", s.URL())
	t.Setenv("AZSIM_CA", s.CAFile())
	topo := filepath.Join(t.TempDir(), "topo.yaml")
	if err := os.WriteFile(topo, []byte("resourceGroups: [rg-cli]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Keep the commands' JSON off the test output.
	devnull, _ := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	stdout := os.Stdout
	os.Stdout = devnull
	defer func() { os.Stdout = stdout }()

	rgID := "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg-cli"
	for _, args := range [][]string{
		{"info"},
		{"seed", "-f", topo},
		{"get", rgID},
		{"list", "Microsoft.Resources/resourceGroups"},
		{"fault", "add", "--kind", "error", "--status", "503", "--id", "x", "--rate", "0.5"},
		{"fault", "add", "--json", `{"kind":"latency","delay":"1ms"}`},
		{"fault", "list"},
		{"fault", "rm", "x"},
		{"fault", "clear"},
		{"latency", "set", "--realistic"},
		{"latency", "get"},
		{"latency", "clear"},
		{"throttle", "set", "--reads", "10"},
		{"throttle", "get"},
		{"throttle", "off"},
		{"stats"},
		{"stats", "--prometheus"},
		{"stats", "--reset"},
		{"imds-vm", "vm-1"},
		{"reset"},
	} {
		if err := run(args); err != nil {
			t.Errorf("azsim %v: %v", args, err)
		}
	}
	if s.IMDS().DefaultVM() != "" {
		t.Error("reset did not clear the IMDS default VM")
	}
	if _, ok := s.Engine().GetResource(rgID); ok {
		t.Error("reset kept the resource group")
	}
	// A private link service owner's decision on a connection.
	if err := os.WriteFile(topo, []byte(plsTopology), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"seed", "-f", topo}); err != nil {
		t.Fatal(err)
	}
	plsID := rgID + "/providers/Microsoft.Network/privateLinkServices/pls"
	raw, _ := s.Engine().GetResource(plsID)
	var pls struct {
		Properties struct {
			PrivateEndpointConnections []struct{ ID string } `json:"privateEndpointConnections"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(raw, &pls); err != nil || len(pls.Properties.PrivateEndpointConnections) != 1 {
		t.Fatalf("seeded service %s", raw)
	}
	connID := pls.Properties.PrivateEndpointConnections[0].ID
	if err := run([]string{"pe-connection", "reject", connID, "-description", "no"}); err != nil {
		t.Fatal(err)
	}
	if raw, _ := s.Engine().GetResource(connID); !strings.Contains(string(raw), `"Rejected"`) || !strings.Contains(string(raw), `"no"`) {
		t.Fatalf("after reject: %s", raw)
	}
	// A third party's edits.
	if err := os.WriteFile(topo, []byte(driftTopology), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"seed", "-f", topo}); err != nil {
		t.Fatal(err)
	}
	lb2 := rgID + "/providers/Microsoft.Network/loadBalancers/lb2"
	for _, args := range [][]string{
		{"drift", "change-probe", lb2, "r", "-interval", "9"},
		{"drift", "delete-rule", lb2, "r"},
	} {
		if err := run(args); err != nil {
			t.Fatalf("azsim %v: %v", args, err)
		}
	}
	if raw, _ := s.Engine().GetResource(lb2); strings.Contains(string(raw), "loadBalancingRules/r") || !strings.Contains(string(raw), `"intervalInSeconds":9`) {
		t.Errorf("after the drift commands: %s", raw)
	}
	for _, args := range [][]string{{"drift", "delete-rule", lb2}, {"drift", "explode", lb2, "r"}, {"drift", "delete-rule", lb2, "r"}} {
		if err := run(args); err == nil {
			t.Errorf("azsim %v succeeded", args)
		}
	}
	for _, args := range [][]string{{"pe-connection", "approve"}, {"pe-connection", "explode", connID}} {
		if err := run(args); err == nil {
			t.Errorf("azsim %v succeeded", args)
		}
	}

	for _, args := range [][]string{
		{"nonsense"},
		{"get"},
		{"fault", "add", "--kind", "explode"},
		{"seed"},
		{"vm", "explode", rgID + "/providers/Microsoft.Compute/virtualMachines/x"},
	} {
		if err := run(args); err == nil {
			t.Errorf("azsim %v succeeded", args)
		}
	}
	t.Setenv("AZSIM_URL", "")
	if err := run([]string{"stats"}); err == nil {
		t.Error("stats without a server succeeded")
	}
}

// driftTopology is a public load balancer with a rule (and the rule's probe).
const driftTopology = `
resourceGroups: [rg-cli]
publicIPs: [{resourceGroup: rg-cli, name: pip}]
loadBalancers: [{resourceGroup: rg-cli, name: lb2, frontends: [{name: fe, publicIP: pip}], backendPools: [pool],
  rules: [{name: r, frontend: fe, backendPool: pool, port: 80}]}]
`

// plsTopology is a service with an endpoint of its owner (approved on arrival).
const plsTopology = `
resourceGroups: [rg-cli]
virtualNetworks:
- resourceGroup: rg-cli
  name: vnet
  addressPrefixes: [10.0.0.0/16]
  subnets:
  - {name: nodes, addressPrefix: 10.0.1.0/24}
  - {name: nat, addressPrefix: 10.0.2.0/24, privateLinkServiceNetworkPolicies: Disabled}
loadBalancers: [{resourceGroup: rg-cli, name: lb, frontends: [{name: fe, subnet: {name: nodes}}]}]
privateLinkServices: [{resourceGroup: rg-cli, name: pls, loadBalancer: lb, frontend: fe, subnet: {name: nat}}]
privateEndpoints: [{resourceGroup: rg-cli, name: pe, subnet: {name: nodes}, privateLinkService: pls}]
`

func TestExposedWarning(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want string
	}{
		{"127.0.0.1:8443", ""},
		{"[::1]:8443", ""},
		{"localhost:8443", ""},
		{"127.0.0.5:0", ""},
		{"0.0.0.0:8443", "warning: --addr 0.0.0.0:8443 listens on 0.0.0.0, beyond the loopback interface; azsim's control API and identity endpoints take no credentials, so anyone who reaches it can change the simulated cloud and obtain tokens"},
		{":8443", "warning: --addr :8443 listens on every interface, beyond the loopback interface; azsim's control API and identity endpoints take no credentials, so anyone who reaches it can change the simulated cloud and obtain tokens"},
		{"10.1.2.3:8443", "warning: --addr 10.1.2.3:8443 listens on 10.1.2.3, beyond the loopback interface; azsim's control API and identity endpoints take no credentials, so anyone who reaches it can change the simulated cloud and obtain tokens"},
	} {
		if got := exposedWarning("--addr", tc.addr); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.addr, got, tc.want)
		}
	}
}
