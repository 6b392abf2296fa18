// Package identity is azsim's Entra ID: the OpenID metadata and OAuth2 token endpoints that
// azidentity/MSAL call, the App Service and IMDS managed-identity token endpoints, the ARM cloud
// metadata document, and the bearer-token validator that guards the ARM API.
package identity

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
)

// Credentials are the identities azsim accepts. Everything else is refused with invalid_client.
type Credentials struct {
	// TenantID is the tenant tokens are issued for. Requests for the tenant ID, its lower-case
	// form, "adfs" (the Azure CLI's offline login), "organizations" and "common" are served.
	TenantID string `json:"tenantId"`
	// Clients are service principals (app registrations).
	Clients []Client `json:"clients,omitempty"`
	// ManagedIdentities are served on the managed-identity endpoints. The first entry with
	// System=true answers requests that name no identity.
	ManagedIdentities []ManagedIdentity `json:"managedIdentities,omitempty"`
	// IdentityHeader is the secret App Service callers send as X-IDENTITY-HEADER
	// (IDENTITY_HEADER). Empty accepts any non-empty value.
	IdentityHeader string `json:"identityHeader,omitempty"`
	// Tenants are further tenants served: a token asked for one of them carries it as tid.
	// Every client is known in every tenant (multi-tenant applications).
	Tenants []string `json:"tenants,omitempty"`
	// SubscriptionTenants places subscriptions in tenants (subscription ID -> tenant ID); any
	// other subscription belongs to TenantID. ARM refuses a token from another tenant than the
	// subscription's, as Azure does (InvalidAuthenticationTokenTenant).
	SubscriptionTenants map[string]string `json:"subscriptionTenants,omitempty"`
}

// TenantOf is the tenant a subscription belongs to.
func (c Credentials) TenantOf(subscription string) string {
	for sub, t := range c.SubscriptionTenants {
		if strings.EqualFold(sub, subscription) {
			return t
		}
	}
	return c.TenantID
}

// issuingTenant is the tid of a token asked for at /{tenant}/...: that tenant when it is one
// of azsim's, else (adfs, organizations, common) the default tenant.
func (c Credentials) issuingTenant(requested string) string {
	for _, t := range c.Tenants {
		if strings.EqualFold(t, requested) {
			return t
		}
	}
	return c.TenantID
}

// Client is one service principal.
type Client struct {
	ClientID string `json:"clientId"`
	// ObjectID becomes the token's oid; defaults to ClientID.
	ObjectID string `json:"objectId,omitempty"`
	// Secret enables the client-secret grant.
	Secret string `json:"secret,omitempty"`
	// CertificatePEM enables the client-certificate grant: the client_assertion's signature must
	// verify with the public key of one of these certificates.
	CertificatePEM string `json:"certificatePEM,omitempty"`
	// Federated enables the workload-identity grant (a federated identity credential, as in
	// Entra ID): the client_assertion must be a JWT signed by one of FederatedIssuerKeysPEM, with
	// iss = FederatedIssuer, sub = FederatedSubject, an aud among FederatedAudiences, unexpired.
	Federated        bool   `json:"federated,omitempty"`
	FederatedIssuer  string `json:"federatedIssuer,omitempty"`
	FederatedSubject string `json:"federatedSubject,omitempty"`
	// FederatedAudiences default to api://AzureADTokenExchange (Entra's recommended audience).
	FederatedAudiences []string `json:"federatedAudiences,omitempty"`
	// FederatedIssuerKeysPEM are the issuer's signing keys ("PUBLIC KEY" or "CERTIFICATE"
	// blocks): what Entra reads from the issuer's JWKS, e.g. the public half of the
	// kube-apiserver's --service-account-key-file.
	FederatedIssuerKeysPEM string `json:"federatedIssuerKeysPEM,omitempty"`
}

// DefaultFederatedAudience is the audience Entra ID recommends for federated credentials.
const DefaultFederatedAudience = "api://AzureADTokenExchange"

func (c Client) federatedAudiences() []string {
	if len(c.FederatedAudiences) > 0 {
		return c.FederatedAudiences
	}
	return []string{DefaultFederatedAudience}
}

// federatedKeys parses FederatedIssuerKeysPEM.
func (c Client) federatedKeys() ([]any, error) {
	var keys []any
	rest := []byte(c.FederatedIssuerKeysPEM)
	for {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		switch blk.Type {
		case "PUBLIC KEY":
			k, err := x509.ParsePKIXPublicKey(blk.Bytes)
			if err != nil {
				return nil, fmt.Errorf("client %s: federatedIssuerKeysPEM: %w", c.ClientID, err)
			}
			keys = append(keys, k)
		case "RSA PUBLIC KEY":
			k, err := x509.ParsePKCS1PublicKey(blk.Bytes)
			if err != nil {
				return nil, fmt.Errorf("client %s: federatedIssuerKeysPEM: %w", c.ClientID, err)
			}
			keys = append(keys, k)
		case "CERTIFICATE":
			cert, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				return nil, fmt.Errorf("client %s: federatedIssuerKeysPEM: %w", c.ClientID, err)
			}
			keys = append(keys, cert.PublicKey)
		}
	}
	return keys, nil
}

// ManagedIdentity is one system- or user-assigned identity.
type ManagedIdentity struct {
	ClientID   string `json:"clientId"`
	ObjectID   string `json:"objectId,omitempty"`
	ResourceID string `json:"resourceId,omitempty"`
	System     bool   `json:"system,omitempty"`
}

func (c Client) objectID() string {
	if c.ObjectID != "" {
		return c.ObjectID
	}
	return c.ClientID
}

func (m ManagedIdentity) objectID() string {
	if m.ObjectID != "" {
		return m.ObjectID
	}
	return m.ClientID
}

func (c Client) certificates() ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	rest := []byte(c.CertificatePEM)
	for {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("client %s: parsing certificate: %w", c.ClientID, err)
		}
		out = append(out, cert)
	}
	return out, nil
}

// Validate reports configuration mistakes early instead of at the first login.
func (c Credentials) Validate() error {
	if c.TenantID == "" {
		return fmt.Errorf("identity: tenantId is required")
	}
	seen := map[string]bool{}
	for _, cl := range c.Clients {
		if cl.ClientID == "" {
			return fmt.Errorf("identity: a client has no clientId")
		}
		if seen[strings.ToLower(cl.ClientID)] {
			return fmt.Errorf("identity: client %s is listed twice", cl.ClientID)
		}
		seen[strings.ToLower(cl.ClientID)] = true
		if cl.Secret == "" && cl.CertificatePEM == "" && !cl.Federated {
			return fmt.Errorf("identity: client %s has no secret, certificate or federation", cl.ClientID)
		}
		certs, err := cl.certificates()
		if err != nil {
			return err
		}
		if cl.CertificatePEM != "" && len(certs) == 0 {
			return fmt.Errorf("identity: client %s: certificatePEM holds no certificate", cl.ClientID)
		}
		if cl.Federated {
			if cl.FederatedIssuer == "" || cl.FederatedSubject == "" {
				return fmt.Errorf("identity: client %s: a federated credential needs federatedIssuer and federatedSubject", cl.ClientID)
			}
			keys, err := cl.federatedKeys()
			if err != nil {
				return fmt.Errorf("identity: %w", err)
			}
			if len(keys) == 0 {
				return fmt.Errorf("identity: client %s: federatedIssuerKeysPEM holds no public key (azsim verifies federated assertions)", cl.ClientID)
			}
		}
	}
	for _, mi := range c.ManagedIdentities {
		if mi.ClientID == "" {
			return fmt.Errorf("identity: a managed identity has no clientId")
		}
	}
	for sub, t := range c.SubscriptionTenants {
		if !strings.EqualFold(t, c.TenantID) && !slices.ContainsFunc(c.Tenants, func(x string) bool { return strings.EqualFold(x, t) }) {
			return fmt.Errorf("identity: subscriptionTenants: subscription %s is placed in tenant %s, which is neither tenantId nor in tenants", sub, t)
		}
	}
	return nil
}

func (c Credentials) client(id string) (Client, bool) {
	for _, cl := range c.Clients {
		if strings.EqualFold(cl.ClientID, id) {
			return cl, true
		}
	}
	return Client{}, false
}

// managedIdentity picks the identity a managed-identity request names: by client ID, object
// (principal) ID or resource ID, else the system-assigned one.
func (c Credentials) managedIdentity(clientID, objectID, resourceID string) (ManagedIdentity, bool) {
	for _, mi := range c.ManagedIdentities {
		switch {
		case clientID != "" && strings.EqualFold(mi.ClientID, clientID),
			objectID != "" && strings.EqualFold(mi.objectID(), objectID),
			resourceID != "" && strings.EqualFold(mi.ResourceID, resourceID):
			return mi, true
		}
	}
	if clientID != "" || objectID != "" || resourceID != "" {
		return ManagedIdentity{}, false
	}
	for _, mi := range c.ManagedIdentities {
		if mi.System {
			return mi, true
		}
	}
	return ManagedIdentity{}, false
}

func (c Credentials) tenantServed(t string) bool {
	switch strings.ToLower(t) {
	case strings.ToLower(c.TenantID), "adfs", "organizations", "common":
		return true
	}
	return slices.ContainsFunc(c.Tenants, func(x string) bool { return strings.EqualFold(x, t) })
}
