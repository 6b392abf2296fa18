package arm_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/server"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	"github.com/azure-ccm/azure-ccm/internal/config"
)

// TestStackAPIVersionsAgainstAzsim: on Azure Stack the clients send the pinned api-versions
// (azsim records what it received); with disableAzureStackCloud they send the SDK's own.
func TestStackAPIVersionsAgainstAzsim(t *testing.T) {
	sim, err := server.Start(context.Background(), server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	calls := func(t *testing.T, extra string) {
		t.Helper()
		cfg, err := config.Parse([]byte(fmt.Sprintf(`{"cloud":"AzureStackCloud","tenantId":%q,"subscriptionId":%q,
			"aadClientId":%q,"aadClientSecret":%q,"resourceGroup":"rg","location":"eastus"%s}`,
			server.DefaultTenantID, topology.DefaultSubscriptionID, server.DefaultClientID, server.DefaultClientSecret, extra)), nil)
		if err != nil {
			t.Fatal(err)
		}
		env, err := config.ResolveEnvironment(ctx, cfg, sim.LookupEnvironmentFile, nil)
		if err != nil {
			t.Fatal(err)
		}
		c, err := arm.New(ctx, cfg, arm.Options{Transport: sim.HTTPClient(), Environment: &env, Metrics: arm.NewMetrics(),
			Retry: &policy.RetryOptions{MaxRetries: -1}})
		if err != nil {
			t.Fatal(err)
		}
		_ = sim.Reset()
		for name, f := range map[string]func() error{
			"load balancers": func() error {
				_, err := c.Network.NewLoadBalancersClient().NewListAllPager(nil).NextPage(ctx)
				return err
			},
			"public IPs": func() error {
				_, err := c.Network.NewPublicIPAddressesClient().NewListAllPager(nil).NextPage(ctx)
				return err
			},
			"security groups": func() error {
				_, err := c.Network.NewSecurityGroupsClient().NewListAllPager(nil).NextPage(ctx)
				return err
			},
			"route tables": func() error {
				_, err := c.Network.NewRouteTablesClient().NewListAllPager(nil).NextPage(ctx)
				return err
			},
			"interfaces": func() error { _, err := c.Network.NewInterfacesClient().NewListAllPager(nil).NextPage(ctx); return err },
			"virtual machines": func() error {
				_, err := c.Compute.NewVirtualMachinesClient().NewListAllPager(nil).NextPage(ctx)
				return err
			},
			"scale sets": func() error {
				_, err := c.Compute.NewVirtualMachineScaleSetsClient().NewListAllPager(nil).NextPage(ctx)
				return err
			},
		} {
			if err := f(); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
	stats := func() func(string) []string { return sim.Middleware().Stats().APIVersionsOf }

	t.Run("Azure Stack", func(t *testing.T) {
		calls(t, "")
		of := stats()
		for typ, want := range map[string]string{
			"Microsoft.Network/loadBalancers": "2018-11-01", "Microsoft.Network/publicIPAddresses": "2018-11-01",
			"Microsoft.Network/networkSecurityGroups": "2018-11-01", "Microsoft.Network/routeTables": "2018-11-01",
			"Microsoft.Network/networkInterfaces": "2018-11-01", "Microsoft.Compute/virtualMachines": "2017-12-01",
			"Microsoft.Compute/virtualMachineScaleSets": "2019-07-01",
		} {
			if got := of(typ); !slices.Equal(got, []string{want}) {
				t.Errorf("%s: azsim received api-versions %v, want [%s]", typ, got, want)
			}
		}
	})
	t.Run("disableAzureStackCloud", func(t *testing.T) {
		calls(t, `,"disableAzureStackCloud":true`)
		of := stats()
		for _, typ := range []string{"Microsoft.Network/loadBalancers", "Microsoft.Compute/virtualMachines"} {
			got := of(typ)
			if len(got) != 1 || got[0] == "2018-11-01" || got[0] == "2017-12-01" {
				t.Errorf("%s: azsim received api-versions %v, want the SDK's current one", typ, got)
			}
		}
	})
}

func TestStackAPIVersion(t *testing.T) {
	for path, want := range map[string]string{
		"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/lb":                             "2018-11-01",
		"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/lb/backendAddressPools/p":       "2018-11-01",
		"/subscriptions/s/providers/Microsoft.Network/publicIPAddresses":                                              "2018-11-01",
		"/subscriptions/s/resourceGroups/rg/providers/microsoft.network/networkInterfaces/n/ipConfigurations/c":       "2018-11-01",
		"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/s":                  "2018-11-01",
		"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/privateLinkServices/p":                        "2019-03-01",
		"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm":                           "2017-12-01",
		"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/ss/virtualMachines/0": "2019-07-01",
		"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/availabilitySets/as":                          "2019-07-01",
		"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/d":                                      "2019-03-01",
		// Not pinned.
		"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/ss/virtualMachines/0/networkInterfaces/n": "",
		"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/natGateways/g":                                                    "",
		"/subscriptions/s/providers/Microsoft.Network/locations/eastus/operations/x":                                                      "",
		"/subscriptions/s/providers/Microsoft.Compute":                                                                                    "",
		"/subscriptions/s/resourceGroups/rg":                                                                                              "",
	} {
		got, ok := arm.StackAPIVersion(path)
		if got != want || ok != (want != "") {
			t.Errorf("%s: %q (%v), want %q", path, got, ok, want)
		}
	}
}
