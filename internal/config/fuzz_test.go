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

// FuzzMetadataDocument: whatever a resourceManagerEndpoint serves, an accepted environment sends
// credentials and tokens over https only and has an audience.
func FuzzMetadataDocument(f *testing.F) {
	for _, s := range []string{
		`[{"name":"AzureCloud","resourceManager":"https://arm/","authentication":{"audiences":["https://a/"],"loginEndpoint":"https://login/"}}]`,
		`{"name":"x","resourceManager":"https://arm/","authentication":{"audiences":["https://a/"],"loginEndpoint":"http://login/"}}`,
		`[{"name":"AzureCloud","authentication":{"audiences":[],"loginEndpoint":"https://login/"}}]`, `[]`, `null`, `{`,
	} {
		f.Add([]byte(s), "AzureCloud")
	}
	f.Fuzz(func(t *testing.T, body []byte, cloudName string) {
		env, err := environmentFromMetadata(body, "https://arm.example/metadata/endpoints", "https://arm.example", cloudName)
		if err != nil {
			return
		}
		for what, u := range map[string]string{"login": env.ActiveDirectoryEndpoint, "ARM": env.ResourceManagerEndpoint} {
			if CheckHTTPSURL(u) != nil {
				t.Fatalf("%s endpoint %q accepted", what, u)
			}
		}
		if env.TokenAudience == "" {
			t.Fatal("no audience")
		}
	})
}

// FuzzEnvironmentFile: an accepted AZURE_ENVIRONMENT_FILEPATH file names https endpoints only.
func FuzzEnvironmentFile(f *testing.F) {
	for _, s := range []string{
		`{"name":"local","resourceManagerEndpoint":"https://127.0.0.1:8443/","tokenAudience":"https://aud/","activeDirectoryEndpoint":"https://127.0.0.1:8443/"}`,
		`{"resourceManagerEndpoint":"http://x/"}`, `{}`, `[]`, `{"activeDirectoryEndpoint":"https://u:p@h/"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fe, err := parseEnvironmentFile(data, "env.json")
		if err != nil {
			return
		}
		for _, u := range []string{fe.ResourceManagerEndpoint, fe.ActiveDirectoryEndpoint} {
			if u != "" && CheckHTTPSURL(u) != nil {
				t.Fatalf("endpoint %q accepted", u)
			}
		}
	})
}
