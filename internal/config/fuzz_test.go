package config

import (
	"strings"
	"testing"
)

// FuzzParse: azure.json (JSON or YAML) never panics, and an accepted configuration never shows
// its secrets when printed.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"tenantId":"t","subscriptionId":"s","aadClientId":"c","aadClientSecret":"sekrit","resourceGroup":"rg","location":"eastus"}`,
		"tenantId: t\nsubscriptionId: s\nuseManagedIdentityExtension: true\nresourceGroup: rg\nlocation: eastus\n",
		`{"loadBalancerSku":"basic","vmType":"vmss","cloudProviderRateLimitQPS":-1}`,
		`{"multipleStandardLoadBalancerConfigurations":[{"name":"a","primaryVMSet":"p"}]}`,
		`[]`, `null`, `{"cloud":"AzureStackCloud","resourceManagerEndpoint":"http://x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b, func(string) string { return "" })
		if err != nil || c == nil {
			return
		}
		if s := c.AADClientSecret.Value(); len(s) >= 4 && strings.Contains(c.String(), s) {
			t.Fatalf("printed configuration shows the client secret")
		}
	})
}
