package server

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Env is the environment a client process needs to use this azsim: trust (SSL_CERT_FILE,
// REQUESTS_CA_BUNDLE for the Azure CLI), the azsim URLs, the default service principal as
// azidentity's environment credential reads it, and the App Service managed-identity endpoint.
func (s *Server) Env() []string {
	creds := s.Credentials()
	env := map[string]string{
		"AZSIM_URL":             s.url,
		"AZSIM_CA":              s.files.CA,
		"SSL_CERT_FILE":         s.files.Bundle,
		"REQUESTS_CA_BUNDLE":    s.files.Bundle,
		"AZURE_AUTHORITY_HOST":  s.url + "/",
		"AZURE_TENANT_ID":       creds.TenantID,
		"AZURE_SUBSCRIPTION_ID": s.opts.SubscriptionID,
	}
	if s.envFile != "" {
		env["AZURE_ENVIRONMENT_FILEPATH"] = s.envFile
	}
	for _, c := range creds.Clients {
		if c.Secret != "" {
			env["AZURE_CLIENT_ID"], env["AZURE_CLIENT_SECRET"] = c.ClientID, c.Secret
			break
		}
	}
	if s.imdsURL != "" {
		env["AZSIM_IMDS_URL"] = s.imdsURL
		env["IDENTITY_ENDPOINT"] = s.imdsURL + "/msi/token"
		env["IDENTITY_HEADER"] = creds.IdentityHeader
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// WriteEnvFile writes Env as a shell-sourceable file (export KEY='value' lines).
func (s *Server) WriteEnvFile(path string) error {
	var b strings.Builder
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&b, "export %s='%s'\n", k, strings.ReplaceAll(v, "'", `'\''`))
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

// AzureEnvironment is the Azure Stack style environment document (AZURE_ENVIRONMENT_FILEPATH)
// that points a cloud provider at this azsim: ARM and Entra ID on azsim's URL.
func (s *Server) AzureEnvironment() map[string]any {
	base := s.url + "/"
	return map[string]any{
		"name":                       s.opts.CloudName,
		"resourceManagerEndpoint":    base,
		"activeDirectoryEndpoint":    base,
		"tokenAudience":              "https://management.azure.com/",
		"serviceManagementEndpoint":  "https://management.core.windows.net/",
		"graphEndpoint":              base,
		"storageEndpointSuffix":      "core.windows.net",
		"keyVaultDNSSuffix":          "vault.azure.net",
		"containerRegistryDNSSuffix": "azurecr.io",
		"resourceManagerVMDNSSuffix": "cloudapp.azure.com",
	}
}

// EnvironmentFile is the path of the AzureEnvironment document written at start.
func (s *Server) EnvironmentFile() string { return s.envFile }

// LookupEnvironmentFile is a getenv that knows AZURE_ENVIRONMENT_FILEPATH only (the
// environment document of this azsim) and nothing else, for in-process clients.
func (s *Server) LookupEnvironmentFile(key string) string {
	if key == "AZURE_ENVIRONMENT_FILEPATH" {
		return s.envFile
	}
	return ""
}

func (s *Server) writeEnvironmentFile(dir string) error {
	b, err := json.MarshalIndent(s.AzureEnvironment(), "", "  ")
	if err != nil {
		return err
	}
	s.envFile = filepath.Join(dir, "azure-environment.json")
	return os.WriteFile(s.envFile, b, 0o644)
}
