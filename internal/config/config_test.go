package config

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const minimal = `{"subscriptionId":"sub","resourceGroup":"RG1","location":"East US","aadClientId":"id","aadClientSecret":"s3cr3t-value","tenantId":"t"}`

func noEnv(string) string { return "" }

func TestParseDefaults(t *testing.T) {
	c, err := Parse([]byte(minimal), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	checks := map[string][2]any{
		"resourceGroup lower-cased":     {c.ResourceGroup, "rg1"},
		"location normalised":           {c.Location, "eastus"},
		"vmType":                        {c.VMType, VMTypeVMSS},
		"loadBalancerSku":               {c.LoadBalancerSKU, LoadBalancerSKUStandard},
		"backend pool type":             {c.LoadBalancerBackendPoolConfigurationType, BackendPoolNodeIPConfiguration},
		"excludeMaster":                 {c.ExcludeMasters(), true},
		"probe mode":                    {c.ClusterServiceLoadBalancerHealthProbeMode, HealthProbeModeServiceNodePort},
		"probe port":                    {c.ClusterServiceSharedLoadBalancerHealthProbePort, int32(10256)},
		"probe path":                    {c.ClusterServiceSharedLoadBalancerHealthProbePath, "/healthz"},
		"route interval":                {c.RouteUpdateIntervalInSeconds, 30},
		"backoff retries (backoff off)": {c.CloudProviderBackoffRetries, 1},
		"vm cache ttl":                  {c.VMCacheTTLInSeconds, 60},
		"vmss vm cache ttl":             {c.VmssVirtualMachinesCacheTTLInSeconds, 600},
		"non-uniform ttl":               {c.NonVmssUniformNodesCacheTTLInSeconds, 900},
		"cloudConfigType":               {c.CloudConfigType, "merge"},
		"vnet rg":                       {c.VnetRG(), "rg1"},
		"route table rg":                {c.RouteTableRG(), "rg1"},
		"network subscription":          {c.NetworkSubscriptionID(), "sub"},
	}
	for name, v := range checks {
		if v[0] != v[1] {
			t.Errorf("%s: got %v, want %v", name, v[0], v[1])
		}
	}
}

func TestParseYAMLCaseInsensitiveAndCanonical(t *testing.T) {
	in := `
SubscriptionID: sub
resourcegroup: rg
location: westeurope
LOADBALANCERSKU: Standard
vmtype: VMSSFlex
loadBalancerBackendPoolConfigurationType: nodeip
cloudProviderBackoff: true
excludeMasterFromStandardLB: false
multipleStandardLoadBalancerConfigurations:
- name: kubernetes
  primaryVMSet: pool1
  nodeSelector:
    matchLabels: {a: b}
`
	c, err := Parse([]byte(in), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if c.SubscriptionID != "sub" || c.LoadBalancerSKU != "standard" || c.VMType != "vmssflex" ||
		c.LoadBalancerBackendPoolConfigurationType != "nodeIP" || c.CloudProviderBackoffRetries != 6 ||
		c.ExcludeMasters() {
		t.Fatalf("unexpected config: %+v", c)
	}
	if got := c.MultipleStandardLoadBalancerConfigurations[0].NodeSelector.MatchLabels["a"]; got != "b" {
		t.Fatalf("nodeSelector not parsed: %q", got)
	}
}

func TestEnvironmentOverrides(t *testing.T) {
	env := map[string]string{EnvTenantID: "env-tenant", EnvClientID: "env-client", EnvClientSecret: "env-secret"}
	c, err := Parse([]byte(minimal), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.TenantID != "env-tenant" || c.AADClientID != "env-client" || c.AADClientSecret.Value() != "env-secret" {
		t.Fatalf("environment not applied: %+v", c)
	}
	// The workload identity webhook's variables turn workload identity on.
	wi := map[string]string{EnvTenantID: "env-tenant", EnvClientID: "env-client", EnvFederatedTokenFile: "/var/run/token"}
	c, err = Parse([]byte(`{"subscriptionId":"sub","resourceGroup":"rg","location":"eastus"}`), func(k string) string { return wi[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.AADFederatedTokenFile != "/var/run/token" || !c.UseFederatedWorkloadIdentityExtension {
		t.Fatalf("environment not applied: %+v", c)
	}
}

// Several login methods are not an error: the first in the existing provider's order is used,
// the warning names it and every ignored one (with the variable that set it), and only the used
// method's keys are required. AKS's "msi" placeholders next to managed identity are not a
// method.
func TestLoginPrecedence(t *testing.T) {
	base := `"subscriptionId":"s","resourceGroup":"rg","location":"l"`
	sp := `,"tenantId":"t","aadClientId":"c"`
	for name, tc := range map[string]struct {
		json    string
		env     map[string]string
		want    string   // the method used ("" for none)
		ignored []string // in the warning, in order
	}{
		"secret only":             {`{` + base + sp + `,"aadClientSecret":"s3cr3t"}`, nil, LoginClientSecret, nil},
		"certificate only":        {`{` + base + sp + `,"aadClientCertPath":"/c.pem"}`, nil, LoginClientCertificate, nil},
		"managed identity only":   {`{` + base + `,"useManagedIdentityExtension":true}`, nil, LoginManagedIdentity, nil},
		"workload identity (env)": {`{` + base + `}`, map[string]string{EnvTenantID: "t", EnvClientID: "c", EnvFederatedTokenFile: "/var/run/token"}, LoginWorkloadIdentity, nil},
		"managed identity over a secret from the environment": {`{` + base + `,"useManagedIdentityExtension":true}`,
			map[string]string{EnvClientSecret: "x123"}, LoginManagedIdentity, []string{"client-secret (AZURE_CLIENT_SECRET)"}},
		"managed identity over secret and certificate": {`{` + base + sp + `,"useManagedIdentityExtension":true,"aadClientSecret":"s3cr3t","aadClientCertPath":"/c.pem"}`,
			nil, LoginManagedIdentity, []string{"client-secret (aadClientSecret)", "client-certificate (aadClientCertPath)"}},
		"webhook's token file over managed identity and secret": {`{` + base + sp + `,"useManagedIdentityExtension":true,"aadClientSecret":"s3cr3t"}`,
			map[string]string{EnvFederatedTokenFile: "/var/run/token"}, LoginWorkloadIdentity,
			[]string{"managed-identity (useManagedIdentityExtension=true)", "client-secret (aadClientSecret)"}},
		"workload identity key over managed identity": {`{` + base + sp + `,"useFederatedWorkloadIdentityExtension":true,"aadFederatedTokenFile":"/t","useManagedIdentityExtension":true}`,
			nil, LoginWorkloadIdentity, []string{"managed-identity (useManagedIdentityExtension=true)"}},
		"secret over certificate": {`{` + base + sp + `,"aadClientSecret":"s3cr3t","aadClientCertPath":"/c.pem"}`, nil,
			LoginClientSecret, []string{"client-certificate (aadClientCertPath)"}},
		"AKS placeholders": {`{` + base + `,"useManagedIdentityExtension":true,"aadClientId":"msi","aadClientSecret":"msi"}`, nil, LoginManagedIdentity, nil},
		"ignored secret needs no client ID": {`{` + base + `,"useManagedIdentityExtension":true,"aadClientSecret":"s3cr3t"}`, nil,
			LoginManagedIdentity, []string{"client-secret (aadClientSecret)"}},
		"none": {`{` + base + `}`, nil, "", nil},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := Parse([]byte(tc.json), func(k string) string { return tc.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			m, ok := c.LoginMethod()
			if m.Name != tc.want || ok != (tc.want != "") {
				t.Errorf("login method %q (%v), want %q", m.Name, ok, tc.want)
			}
			w := c.LoginWarning()
			if len(tc.ignored) == 0 {
				if w != "" {
					t.Errorf("warning %q, want none", w)
				}
				return
			}
			want := "logging in with " + tc.want + " ("
			if !strings.Contains(w, want) {
				t.Errorf("warning %q does not say %q", w, want)
			}
			if !strings.Contains(w, "ignoring "+strings.Join(tc.ignored, ", ")+";") {
				t.Errorf("warning %q does not ignore exactly %v", w, tc.ignored)
			}
			if strings.Contains(w, "s3cr3t") || strings.Contains(w, "x123") {
				t.Errorf("the warning shows the secret: %v", w)
			}
		})
	}
}

// What the used login method needs is still required.
func TestLoginMethodRequirements(t *testing.T) {
	base := `"subscriptionId":"s","resourceGroup":"rg","location":"l"`
	for name, tc := range map[string]struct{ json, want string }{
		"secret without client ID":      {`{` + base + `,"tenantId":"t","aadClientSecret":"s3cr3t"}`, "aadClientId: is required with aadClientSecret"},
		"certificate without client ID": {`{` + base + `,"tenantId":"t","aadClientCertPath":"/c"}`, "aadClientId: is required with aadClientCertPath"},
		"secret without tenant":         {`{` + base + `,"aadClientId":"c","aadClientSecret":"s3cr3t"}`, "tenantId: is required"},
		"workload identity without token file": {`{` + base + `,"tenantId":"t","aadClientId":"c","useFederatedWorkloadIdentityExtension":true}`,
			"aadFederatedTokenFile: is required"},
		"managed identity across tenants": {`{` + base + `,"tenantId":"t","networkResourceTenantID":"n","useManagedIdentityExtension":true,"aadClientId":"c","aadClientSecret":"s3cr3t"}`,
			"networkResourceTenantID: \"n\" needs a login that works in both tenants"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.json), noEnv)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// Values are quoted short in errors: a 10 MB value does not become a 10 MB log line.
func TestErrorsQuoteValuesShort(t *testing.T) {
	huge := strings.Repeat("x", 10<<20)
	for _, key := range []string{"loadBalancerSku", "vmType", "cloud", "userAssignedIdentityID", "clusterServiceSharedLoadBalancerHealthProbePath", "resourceManagerEndpoint"} {
		_, err := Parse([]byte(`{"subscriptionId":"s","resourceGroup":"rg","location":"l","`+key+`":"`+huge[:500<<10]+`"}`), noEnv)
		if err == nil || !strings.Contains(err.Error(), key+": ") || len(err.Error()) > 2048 || !strings.Contains(err.Error(), "(512000 bytes)") {
			t.Errorf("%s: error of %d bytes: %.300s", key, len(err.Error()), err)
		}
	}
	sel := `{"subscriptionId":"s","resourceGroup":"rg","location":"l","loadBalancerBackendPoolConfigurationType":"nodeIP",
		"multipleStandardLoadBalancerConfigurations":[{"name":"a","primaryVMSet":"p","nodeSelector":{"matchLabels":{"` + huge[:200<<10] + `":"v"}}}]}`
	if _, err := Parse([]byte(sel), noEnv); err == nil || len(err.Error()) > 2048 {
		t.Errorf("label selector error of %d bytes", len(err.Error()))
	}
	// A file over the limit is refused before it is decoded.
	if _, err := Parse([]byte(`{"cloud":"`+huge+`"}`), noEnv); err == nil || !strings.Contains(err.Error(), "larger than the limit") || len(err.Error()) > 200 {
		t.Errorf("oversized file: %v", err)
	}
}

// A JSON mistake is reported with line, column and the key around it, not as a YAML error.
func TestJSONErrorsNameLineAndKey(t *testing.T) {
	for name, tc := range map[string]struct{ in, want string }{
		"missing comma": {"{\n  \"subscriptionId\": \"s\",\n  \"resourceGroup\": \"rg\"\n  \"location\": \"l\"\n}",
			`JSON syntax error at line 4, column 3 (byte 54) near key "resourceGroup"`},
		"bad value": {"{\"subscriptionId\": \"s\",\n \"vmType\": \"vmss\"x}", `JSON syntax error at line 2, column 18 (byte 42) near key "vmType"`},
		"nested": {`{"multipleStandardLoadBalancerConfigurations":[{"name":"a"},{"name": "x" "primaryVMSet": "p"}]}`,
			`near key "multipleStandardLoadBalancerConfigurations[1].name"`},
		"double comma": {`{"subscriptionId": "s",, "location": "l"}`, `JSON syntax error at line 1, column 24 (byte 24) near key "subscriptionId"`},
		"unclosed":     {`{"subscriptionId":"s", "tags": [1, 2}`, `near key "tags[2]"`},
		"wrong type": {"{\"subscriptionId\":\"s\",\n\"vmCacheTTLInSeconds\":\"sixty\"}",
			`key "vmCacheTTLInSeconds": a JSON string where an integer is expected (line 2, column`},
		"wrong nested type": {`{"multipleStandardLoadBalancerConfigurations":[{"name":1}]}`,
			`key "multipleStandardLoadBalancerConfigurations.name": a JSON number where a string is expected`},
		"not an object": {`["a"]`, "the document is a JSON array, not an object"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.in), noEnv)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "yaml") {
				t.Fatalf("want %q, got %v", tc.want, err)
			}
		})
	}
	// What the existing provider's YAML decoder reads is still read (a trailing comma).
	if c, err := Parse([]byte(`{"subscriptionId":"s","resourceGroup":"rg","location":"l","useManagedIdentityExtension":true,}`), noEnv); err != nil || c.SubscriptionID != "s" {
		t.Fatalf("trailing comma: %v", err)
	}
}

// Each invalid value must produce an error that names its key and, where there is one, the value.
func TestValidateNamesOffendingKey(t *testing.T) {
	base := `"subscriptionId":"s","resourceGroup":"rg","location":"l"`
	cases := []struct {
		name, json string
		want       []string
	}{
		{"missing subscription", `{"resourceGroup":"rg","location":"l"}`, []string{"subscriptionId: is required"}},
		{"missing rg", `{"subscriptionId":"s","location":"l"}`, []string{"resourceGroup: is required"}},
		{"missing location", `{"subscriptionId":"s","resourceGroup":"rg"}`, []string{"location: is required"}},
		{"sku", `{` + base + `,"loadBalancerSku":"Premium"}`, []string{`loadBalancerSku: "Premium" is not one of basic, standard, service`}},
		{"vmType", `{` + base + `,"vmType":"vmas"}`, []string{`vmType: "vmas" is not one of standard, vmss, vmssflex`}},
		{"cloud", `{` + base + `,"cloud":"Mars"}`, []string{`cloud: "Mars"`}},
		{"pool type", `{` + base + `,"loadBalancerBackendPoolConfigurationType":"ip"}`, []string{`loadBalancerBackendPoolConfigurationType: "ip"`}},
		{"probe mode", `{` + base + `,"clusterServiceLoadBalancerHealthProbeMode":"x"}`, []string{`clusterServiceLoadBalancerHealthProbeMode: "x"`}},
		{"preconfigured", `{` + base + `,"preConfiguredBackendPoolLoadBalancerTypes":"both"}`, []string{`preConfiguredBackendPoolLoadBalancerTypes: "both"`}},
		{"cloudConfigType", `{` + base + `,"cloudConfigType":"env"}`, []string{`cloudConfigType: "env"`}},
		{"disableAvset", `{` + base + `,"vmType":"standard","disableAvailabilitySetNodes":true}`, []string{`disableAvailabilitySetNodes: true is only valid with vmType vmss, not "standard"`}},
		{"snat basic", `{` + base + `,"loadBalancerSku":"basic","disableOutboundSNAT":true}`, []string{"disableOutboundSNAT:"}},
		{"edge zone type without name", `{` + base + `,"extendedLocationType":"EdgeZone"}`, []string{`extendedLocationType: "EdgeZone" needs extendedLocationName`}},
		{"edge zone type", `{` + base + `,"extendedLocationName":"la1","extendedLocationType":"Region"}`, []string{`extendedLocationType: "Region" is not one of EdgeZone`}},
		{"basic refused", `{` + base + `,"loadBalancerSku":"Basic"}`, []string{`loadBalancerSku: "basic" is not supported`, "set loadBalancerSku to standard"}},
		{"probe port", `{` + base + `,"clusterServiceSharedLoadBalancerHealthProbePort":70000}`, []string{"clusterServiceSharedLoadBalancerHealthProbePort: 70000"}},
		{"probe path", `{` + base + `,"clusterServiceSharedLoadBalancerHealthProbePath":"healthz"}`, []string{`clusterServiceSharedLoadBalancerHealthProbePath: "healthz"`}},
		{"negative ttl", `{` + base + `,"vmCacheTTLInSeconds":-1}`, []string{"vmCacheTTLInSeconds: -1"}},
		{"negative interval", `{` + base + `,"routeUpdateIntervalInSeconds":-5}`, []string{"routeUpdateIntervalInSeconds: -5"}},
		{"negative jitter", `{` + base + `,"cloudProviderBackoffJitter":-1}`, []string{"cloudProviderBackoffJitter: -1"}},
		{"secret without client", `{` + base + `,"tenantId":"t","aadClientSecret":"xxxx"}`, []string{"aadClientId: is required with aadClientSecret"}},
		{"cert without client", `{` + base + `,"tenantId":"t","aadClientCertPath":"/c"}`, []string{"aadClientId: is required with aadClientCertPath"}},
		{"sp without tenant", `{` + base + `,"aadClientId":"c","aadClientSecret":"xxxx"}`, []string{"tenantId: is required"}},
		{"wi without file", `{` + base + `,"tenantId":"t","aadClientId":"c","useFederatedWorkloadIdentityExtension":true}`, []string{"aadFederatedTokenFile: is required"}},
		{"uami without mi", `{` + base + `,"userAssignedIdentityID":"abc"}`, []string{`userAssignedIdentityID: "abc"`}},
		{"network tenant with managed identity", `{` + base + `,"useManagedIdentityExtension":true,"tenantId":"a","networkResourceTenantID":"b"}`, []string{`networkResourceTenantID: "b" needs a login that works in both tenants`}},
		{"rm endpoint", `{` + base + `,"resourceManagerEndpoint":"ftp://x"}`, []string{`resourceManagerEndpoint: "ftp://x" must be an https:// URL`}},
		{"rm endpoint http", `{` + base + `,"resourceManagerEndpoint":"http://127.0.0.1:8080/"}`, []string{`resourceManagerEndpoint: "http://127.0.0.1:8080/" must be an https:// URL`}},
		{"rm endpoint no host", `{` + base + `,"resourceManagerEndpoint":"https:///x"}`, []string{`resourceManagerEndpoint: "https:///x" has no host`}},
		{"rm endpoint userinfo", `{` + base + `,"resourceManagerEndpoint":"https://u:pw@arm.local/"}`, []string{`resourceManagerEndpoint: "https://REDACTED@arm.local/" must not carry user information`}},
		{"service gateway partial", `{` + base + `,"serviceGatewayEnabled":true}`, []string{"serviceGatewayEnabled: "}},
		{"multi-slb pool type", `{` + base + `,"multipleStandardLoadBalancerConfigurations":[{"name":"a","primaryVMSet":"p"}]}`, []string{"multipleStandardLoadBalancerConfigurations: cannot be used with loadBalancerBackendPoolConfigurationType"}},
		{"multi-slb dup", `{` + base + `,"loadBalancerBackendPoolConfigurationType":"nodeIP","multipleStandardLoadBalancerConfigurations":[{"name":"a","primaryVMSet":"p"},{"name":"A","primaryVMSet":"p"}]}`,
			[]string{`multipleStandardLoadBalancerConfigurations[1].name: "A" is used twice`, `multipleStandardLoadBalancerConfigurations[1].primaryVMSet: "p" is used twice`}},
		{"multi-slb no vmset", `{` + base + `,"loadBalancerBackendPoolConfigurationType":"nodeIP","multipleStandardLoadBalancerConfigurations":[{"name":"a"}]}`, []string{"multipleStandardLoadBalancerConfigurations[0].primaryVMSet: is required"}},
		{"two errors at once", `{` + base + `,"loadBalancerSku":"x","vmType":"y"}`, []string{"loadBalancerSku:", "vmType:"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.json), noEnv)
			if err == nil {
				t.Fatal("expected an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestDecodeErrorIsReported(t *testing.T) {
	if _, err := Parse([]byte(`{"vmCacheTTLInSeconds":"sixty"}`), noEnv); err == nil || !strings.Contains(err.Error(), "decoding") {
		t.Fatalf("want decoding error, got %v", err)
	}
}

func TestUnknownKeys(t *testing.T) {
	got, err := UnknownKeys([]byte(`{"subscriptionId":"s","LoadBalancerSKUs":"x","loadBalancerRateLimit":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "LoadBalancerSKUs" {
		t.Fatalf("got %v", got)
	}
}

func TestSecretsNeverPrinted(t *testing.T) {
	c, err := Parse([]byte(minimal+"\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	c.AADClientCertPassword = "pfx-password"
	var sb strings.Builder
	logger := slog.New(slog.NewTextHandler(&sb, nil))
	logger.Info("config", "cfg", c, "secret", c.AADClientSecret)
	outputs := []string{
		fmt.Sprintf("%v", c), fmt.Sprintf("%+v", *c), fmt.Sprintf("%#v", *c), c.String(),
		fmt.Sprint(c.MarshalLog()), sb.String(), fmt.Sprintf("%s", c.AADClientSecret), //nolint:staticcheck // S1025: what fmt prints is under test
	}
	for i, out := range outputs {
		if strings.Contains(out, "s3cr3t-value") || strings.Contains(out, "pfx-password") {
			t.Errorf("output %d leaks a secret: %s", i, out)
		}
	}
	if !strings.Contains(c.String(), redacted) {
		t.Errorf("expected %q in %s", redacted, c.String())
	}
	if c.AADClientSecret.Value() != "s3cr3t-value" {
		t.Errorf("Value() must return the secret")
	}
}

func TestResolveEnvironmentPresets(t *testing.T) {
	for cloudName, wantARM := range map[string]string{
		"":                  "https://management.azure.com/",
		"AzureChinaCloud":   "https://management.chinacloudapi.cn",
		"AZUREUSGOVERNMENT": "https://management.usgovcloudapi.net",
	} {
		c := &Config{Cloud: cloudName}
		env, err := ResolveEnvironment(context.Background(), c, noEnv, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(env.ResourceManagerEndpoint, wantARM) || env.TokenAudience == "" || env.ActiveDirectoryEndpoint == "" {
			t.Errorf("cloud %q: %+v", cloudName, env)
		}
	}
}

func TestResolveEnvironmentStackFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "env.json")
	if err := os.WriteFile(path, []byte(`{"name":"local","resourceManagerEndpoint":"https://127.0.0.1:8443/","tokenAudience":"https://aud/","activeDirectoryEndpoint":"https://127.0.0.1:8443/aad/"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &Config{Cloud: "AzureStackCloud"}
	env, err := ResolveEnvironment(context.Background(), c, func(k string) string {
		if k == EnvEnvironmentFile {
			return path
		}
		return ""
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Environment{Name: "local", ResourceManagerEndpoint: "https://127.0.0.1:8443/", TokenAudience: "https://aud/", ActiveDirectoryEndpoint: "https://127.0.0.1:8443/aad/"}
	if env != want {
		t.Fatalf("got %+v want %+v", env, want)
	}
	if _, err := ResolveEnvironment(context.Background(), c, noEnv, nil); err == nil || !strings.Contains(err.Error(), EnvEnvironmentFile) {
		t.Fatalf("want error naming %s, got %v", EnvEnvironmentFile, err)
	}
}

func TestResolveEnvironmentMetadata(t *testing.T) {
	var hits int
	var body string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		if r.URL.Path != "/metadata/endpoints" || r.URL.Query().Get("api-version") != "2019-05-01" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, body)
	}))
	defer srv.Close()

	body = `[{"name":"Other","resourceManager":"https://other/","authentication":{"audiences":["https://o/"],"loginEndpoint":"https://login.other/"}},
	         {"name":"AzureSim","resourceManager":"` + srv.URL + `/","authentication":{"audiences":["https://management.azsim/"],"loginEndpoint":"https://login.azsim/"}}]`
	c := &Config{Cloud: "AzureSim", ResourceManagerEndpoint: srv.URL}
	// An unknown cloud name is rejected by Validate but metadata lookup itself matches by name.
	env, err := ResolveEnvironment(context.Background(), c, noEnv, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	if env.ResourceManagerEndpoint != srv.URL+"/" || env.TokenAudience != "https://management.azsim/" || env.ActiveDirectoryEndpoint != "https://login.azsim/" {
		t.Fatalf("got %+v", env)
	}
	if hits != 1 {
		t.Fatalf("metadata fetched %d times, want 1", hits)
	}

	c.Cloud = "Missing"
	if _, err := ResolveEnvironment(context.Background(), c, noEnv, srv.Client()); err == nil || !strings.Contains(err.Error(), `cloud "Missing"`) {
		t.Fatalf("want mismatch error, got %v", err)
	}
	for _, audiences := range []string{`[]`, `[""]`, `[" ","https://x/"]`} {
		body = `[{"name":"x","resourceManager":"https://x/","authentication":{"audiences":` + audiences + `,"loginEndpoint":"https://login.x/"}}]`
		if _, err := ResolveEnvironment(context.Background(), c, noEnv, srv.Client()); err == nil || !strings.Contains(err.Error(), "audiences") {
			t.Fatalf("audiences %s: want an audiences error, got %v", audiences, err)
		}
	}
}

func TestExtendedLocationDefaultsToEdgeZone(t *testing.T) {
	for _, in := range []string{`"extendedLocationName":"la1"`, `"extendedLocationName":"la1","extendedLocationType":"edgezone"`} {
		c, err := Parse([]byte(`{"subscriptionId":"s","resourceGroup":"rg","location":"l",`+in+`}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.ExtendedLocationType != ExtendedLocationEdgeZone {
			t.Fatalf("%s: type %q", in, c.ExtendedLocationType)
		}
	}
}
