package arm_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/golang-jwt/jwt/v5"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/identity"
	"github.com/azure-ccm/azure-ccm/internal/azsim/server"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	"github.com/azure-ccm/azure-ccm/internal/config"
)

const (
	certClientID = "55555555-5555-5555-5555-555555555555"
	wiClientID   = "66666666-6666-6666-6666-666666666666"
	wiSubject    = "system:serviceaccount:kube-system:cloud-controller-manager"
)

// TestLoginMethodsAgainstAzsim logs in with every method azure.json can select — client
// secret, client certificate, workload identity, system- and user-assigned managed identity —
// through azidentity against azsim's Entra ID, and checks that ARM accepts the token and that
// it was issued to the identity the configuration names.
func TestLoginMethodsAgainstAzsim(t *testing.T) {
	dir := t.TempDir()
	certPEM, keyPEM := selfSignedCert(t)
	certFile := filepath.Join(dir, "client.pem")
	if err := os.WriteFile(certFile, append(certPEM, keyPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "sa-token")
	issuerKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile, []byte(serviceAccountJWT(t, issuerKey, wiSubject)), 0o600); err != nil {
		t.Fatal(err)
	}
	issuerPub, _ := x509.MarshalPKIXPublicKey(&issuerKey.PublicKey)

	creds := server.DefaultCredentials()
	creds.Clients = append(creds.Clients,
		identity.Client{ClientID: certClientID, CertificatePEM: string(certPEM)},
		identity.Client{ClientID: wiClientID, Federated: true, FederatedIssuer: saIssuer, FederatedSubject: wiSubject,
			FederatedIssuerKeysPEM: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: issuerPub}))})
	sim, err := server.Start(context.Background(), server.Options{Credentials: &creds})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	// The managed-identity credential finds its endpoint in the environment (App Service style).
	t.Setenv("IDENTITY_ENDPOINT", sim.IMDSURL()+"/msi/token")
	t.Setenv("IDENTITY_HEADER", creds.IdentityHeader)

	// Managed identity in azure.json and a client secret in the environment: the existing
	// provider's order picks managed identity, and only managed-identity tokens are issued (first:
	// azidentity caches managed-identity tokens across credentials).
	t.Run("managed identity over AZURE_CLIENT_SECRET", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		env := map[string]string{config.EnvClientSecret: server.DefaultClientSecret}
		cfg, err := config.Parse([]byte(fmt.Sprintf(`{"cloud":"AzureStackCloud","tenantId":%q,"subscriptionId":%q,
			"resourceGroup":"rg","location":"eastus","aadClientId":%q,"useManagedIdentityExtension":true}`,
			server.DefaultTenantID, topology.DefaultSubscriptionID, server.DefaultClientID)), func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		if w := cfg.LoginWarning(); !strings.Contains(w, "logging in with managed-identity") || !strings.Contains(w, "ignoring client-secret (AZURE_CLIENT_SECRET)") {
			t.Errorf("warning %q", w)
		}
		renv, err := config.ResolveEnvironment(ctx, cfg, sim.LookupEnvironmentFile, nil)
		if err != nil {
			t.Fatal(err)
		}
		sim.Identity().ResetLogins()
		clients, err := arm.New(ctx, cfg, arm.Options{Transport: sim.HTTPClient(), Environment: &renv, Metrics: arm.NewMetrics()})
		if err != nil {
			t.Fatal(err)
		}
		if clients.AuthMethod != arm.AuthManagedIdentity {
			t.Fatalf("auth method %s, want %s", clients.AuthMethod, arm.AuthManagedIdentity)
		}
		if _, err := clients.Network.NewPublicIPAddressesClient().NewListAllPager(nil).NextPage(ctx); err != nil {
			t.Fatal(err)
		}
		logins := sim.Identity().Logins()
		if len(logins) != 1 || logins[0].Method != identity.LoginManagedIdentity {
			t.Fatalf("azsim issued %+v, want managed-identity tokens only", logins)
		}
	})

	userMIResource := creds.ManagedIdentities[1].ResourceID
	cases := []struct {
		name, extra string
		method      arm.AuthMethod
		wantApp     string
	}{
		{"client secret", fmt.Sprintf(`"aadClientId":%q,"aadClientSecret":%q`, server.DefaultClientID, server.DefaultClientSecret),
			arm.AuthClientSecret, server.DefaultClientID},
		{"client certificate", fmt.Sprintf(`"aadClientId":%q,"aadClientCertPath":%q`, certClientID, certFile),
			arm.AuthClientCertificate, certClientID},
		{"workload identity", fmt.Sprintf(`"aadClientId":%q,"useFederatedWorkloadIdentityExtension":true,"aadFederatedTokenFile":%q`, wiClientID, tokenFile),
			arm.AuthWorkloadIdentity, wiClientID},
		{"system-assigned managed identity", `"useManagedIdentityExtension":true`,
			arm.AuthManagedIdentity, server.DefaultMIClientID},
		{"user-assigned managed identity by client ID", fmt.Sprintf(`"useManagedIdentityExtension":true,"userAssignedIdentityID":%q`, server.DefaultUserMIClientID),
			arm.AuthManagedIdentity, server.DefaultUserMIClientID},
		{"user-assigned managed identity by resource ID", fmt.Sprintf(`"useManagedIdentityExtension":true,"userAssignedIdentityID":%q`, userMIResource),
			arm.AuthManagedIdentity, server.DefaultUserMIClientID},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cfg, err := config.Parse([]byte(fmt.Sprintf(`{"cloud":"AzureStackCloud","tenantId":%q,"subscriptionId":%q,
				"resourceGroup":"rg","location":"eastus",%s}`, server.DefaultTenantID, topology.DefaultSubscriptionID, tc.extra)), nil)
			if err != nil {
				t.Fatal(err)
			}
			env, err := config.ResolveEnvironment(ctx, cfg, sim.LookupEnvironmentFile, nil)
			if err != nil {
				t.Fatal(err)
			}
			clients, err := arm.New(ctx, cfg, arm.Options{Transport: sim.HTTPClient(), Environment: &env, Metrics: arm.NewMetrics()})
			if err != nil {
				t.Fatal(err)
			}
			if clients.AuthMethod != tc.method {
				t.Fatalf("auth method %s, want %s", clients.AuthMethod, tc.method)
			}
			tok, err := clients.Credential.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{scopeOf(env)}})
			if err != nil {
				t.Fatal(err)
			}
			if app := tokenAppID(t, tok.Token); !strings.EqualFold(app, tc.wantApp) {
				t.Fatalf("token issued to %q, want %q", app, tc.wantApp)
			}
			// ARM accepts it: a real SDK call through the clients.
			pager := clients.Network.NewPublicIPAddressesClient().NewListAllPager(nil)
			if _, err := pager.NextPage(ctx); err != nil {
				t.Fatalf("ARM call with %s token: %v", tc.method, err)
			}
		})
	}

	t.Run("wrong certificate is refused without leaking the key", func(t *testing.T) {
		otherCert, otherKey := selfSignedCert(t)
		bad := filepath.Join(dir, "other.pem")
		if err := os.WriteFile(bad, append(otherCert, otherKey...), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Parse([]byte(fmt.Sprintf(`{"cloud":"AzureStackCloud","tenantId":%q,"subscriptionId":%q,
			"resourceGroup":"rg","location":"eastus","aadClientId":%q,"aadClientCertPath":%q}`,
			server.DefaultTenantID, topology.DefaultSubscriptionID, certClientID, bad)), nil)
		if err != nil {
			t.Fatal(err)
		}
		env, err := config.ResolveEnvironment(context.Background(), cfg, sim.LookupEnvironmentFile, nil)
		if err != nil {
			t.Fatal(err)
		}
		cred, _, err := arm.NewCredential(cfg, env, sim.HTTPClient())
		if err != nil {
			t.Fatal(err)
		}
		_, err = cred.GetToken(context.Background(), policy.TokenRequestOptions{Scopes: []string{scopeOf(env)}})
		if err == nil {
			t.Fatal("a certificate azsim does not know was accepted")
		}
		if strings.Contains(err.Error(), "PRIVATE KEY") {
			t.Fatalf("error leaks key material: %v", err)
		}
	})
}

func selfSignedCert(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "azure-ccm-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb})
}

// saIssuer is the service-account issuer of the test cluster.
const saIssuer = "https://kubernetes.default.svc"

// serviceAccountJWT is a projected service-account token as the kubelet writes it, signed by the
// cluster's issuer key (azsim verifies it against the federated credential).
func serviceAccountJWT(t *testing.T, key *rsa.PrivateKey, sub string) string {
	t.Helper()
	now := time.Now()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.RegisteredClaims{Issuer: saIssuer, Subject: sub,
		Audience: jwt.ClaimStrings{"api://AzureADTokenExchange"}, IssuedAt: jwt.NewNumericDate(now),
		NotBefore: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour))})
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func tokenAppID(t *testing.T, jwt string) string {
	t.Helper()
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		t.Fatalf("token is not a JWT")
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		AppID string `json:"appid"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c.AppID
}

// scopeOf is the ARM token scope of an environment, as the SDK's bearer policy asks for it.
func scopeOf(env config.Environment) string {
	aud := env.TokenAudience
	if aud == "" {
		aud = env.ResourceManagerEndpoint
	}
	return strings.TrimSuffix(aud, "/") + "/.default"
}
