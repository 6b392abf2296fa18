// Package identity is azsim's Entra ID: the OpenID metadata and OAuth2 token endpoints that
// azidentity/MSAL call, the App Service and IMDS managed-identity token endpoints, the ARM cloud
// metadata document, and the bearer-token validator that guards the ARM API.
package identity

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
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
	// OtherTenants are further tenants the service principals exist in (multi-tenant app
	// registrations): tokens are issued for them when asked (managed identities stay in
	// TenantID).
	OtherTenants []string `json:"otherTenants,omitempty"`
	// SubscriptionTenants maps subscription IDs to their tenant (default TenantID). ARM refuses
	// a token of another tenant for a subscription; a request for a subscription outside
	// TenantID must also carry a TenantID token in x-ms-authorization-auxiliary, as Azure asks
	// when resources of two tenants are linked (a load balancer and the cluster's NICs).
	SubscriptionTenants map[string]string `json:"subscriptionTenants,omitempty"`
	// IdentityHeader is the secret App Service callers send as X-IDENTITY-HEADER
	// (IDENTITY_HEADER). Empty accepts any non-empty value.
	IdentityHeader string `json:"identityHeader,omitempty"`
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
	// Federated enables the workload-identity grant: any well-formed, unexpired JWT is accepted
	// as client_assertion (azsim does not know the cluster's service-account issuer keys), as
	// long as its subject matches FederatedSubject when that is set.
	Federated        bool   `json:"federated,omitempty"`
	FederatedSubject string `json:"federatedSubject,omitempty"`
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
	}
	for _, mi := range c.ManagedIdentities {
		if mi.ClientID == "" {
			return fmt.Errorf("identity: a managed identity has no clientId")
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
	_, ok := c.otherTenant(t)
	return ok
}

// otherTenant returns the OtherTenants entry t names.
func (c Credentials) otherTenant(t string) (string, bool) {
	for _, o := range c.OtherTenants {
		if strings.EqualFold(o, t) {
			return o, true
		}
	}
	return "", false
}

// tokenTenant is the tenant a token asked for at t is issued in.
func (c Credentials) tokenTenant(t string) string {
	if o, ok := c.otherTenant(t); ok {
		return o
	}
	return c.TenantID
}

// subscriptionTenant is the tenant of a subscription.
func (c Credentials) subscriptionTenant(sub string) string {
	for s, t := range c.SubscriptionTenants {
		if strings.EqualFold(s, sub) {
			return t
		}
	}
	return c.TenantID
}
