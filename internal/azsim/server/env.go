package server

import (
	"fmt"
	"os"
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
