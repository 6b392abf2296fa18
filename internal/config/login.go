package config

import (
	"fmt"
	"strings"
)

// Login method names, in the existing provider's order of precedence.
const (
	LoginWorkloadIdentity  = "workload-identity"
	LoginManagedIdentity   = "managed-identity"
	LoginClientSecret      = "client-secret"
	LoginClientCertificate = "client-certificate"
)

// LoginMethod is one login method the configuration turns on.
type LoginMethod struct {
	// Name is one of the Login* names.
	Name string
	// Key is the azure.json key that turns it on; What says how it was set, for messages.
	Key, What string
}

// msiPlaceholder is what AKS-style azure.json files carry in aadClientId and aadClientSecret
// next to useManagedIdentityExtension: true. It is not a credential and is ignored.
const msiPlaceholder = "msi"

// LoginMethods lists the login methods the configuration turns on, in the existing provider's
// order of precedence: workload identity, managed identity, client secret, client certificate.
// The first is the one used; the others are ignored (LoginWarning).
func (c *Config) LoginMethods() []LoginMethod {
	var out []LoginMethod
	if c.UseFederatedWorkloadIdentityExtension {
		what := "useFederatedWorkloadIdentityExtension=true"
		if c.federatedFromEnv {
			what = EnvFederatedTokenFile
		}
		out = append(out, LoginMethod{LoginWorkloadIdentity, "useFederatedWorkloadIdentityExtension", what})
	}
	if c.UseManagedIdentityExtension {
		out = append(out, LoginMethod{LoginManagedIdentity, "useManagedIdentityExtension", "useManagedIdentityExtension=true"})
	}
	placeholder := c.UseManagedIdentityExtension && strings.EqualFold(c.AADClientSecret.Value(), msiPlaceholder)
	if c.AADClientSecret != "" && !placeholder {
		what := "aadClientSecret"
		if c.secretFromEnv {
			what = EnvClientSecret
		}
		out = append(out, LoginMethod{LoginClientSecret, "aadClientSecret", what})
	}
	if c.AADClientCertPath != "" {
		out = append(out, LoginMethod{LoginClientCertificate, "aadClientCertPath", "aadClientCertPath"})
	}
	return out
}

// LoginMethod returns the login method used: the first of LoginMethods (false when none is
// configured).
func (c *Config) LoginMethod() (LoginMethod, bool) {
	if m := c.LoginMethods(); len(m) > 0 {
		return m[0], true
	}
	return LoginMethod{}, false
}

// LoginWarning says which login method is used and which are ignored when several are
// configured ("" otherwise). The existing provider takes the first one silently; a leftover
// client secret or a federated token file injected by the workload identity webhook then
// changes the identity, so the choice is said out loud.
func (c *Config) LoginWarning() string {
	m := c.LoginMethods()
	if len(m) < 2 {
		return ""
	}
	ignored := make([]string, 0, len(m)-1)
	for _, x := range m[1:] {
		ignored = append(ignored, fmt.Sprintf("%s (%s)", x.Name, x.What))
	}
	return fmt.Sprintf("several login methods are configured: logging in with %s (%s), ignoring %s; "+
		"the order is workload identity, managed identity, client secret, client certificate",
		m[0].Name, m[0].What, strings.Join(ignored, ", "))
}
