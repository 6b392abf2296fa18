package arm

import (
	"crypto"
	"crypto/x509"
	"fmt"
	"net/url"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/azure-ccm/azure-ccm/internal/config"
)

// wellKnownAuthorityHosts are the hosts MSAL trusts without instance discovery. For any other
// host MSAL would ask login.microsoftonline.com first, which fails in a sovereign/private or
// local (azsim) cloud; so for those we disable instance discovery.
var wellKnownAuthorityHosts = map[string]bool{
	"login.microsoftonline.com": true, "login.microsoftonline.us": true, "login.microsoftonline.de": true,
	"login.windows.net": true, "login.microsoft.com": true, "sts.windows.net": true,
	"login.chinacloudapi.cn": true, "login.partner.microsoftonline.cn": true,
	"login-us.microsoftonline.com": true, "login.usgovcloudapi.net": true,
}

// IsWellKnownAuthorityHost reports whether authority (a URL) is a public-cloud login host.
func IsWellKnownAuthorityHost(authority string) bool {
	u, err := url.Parse(authority)
	if err != nil {
		return false
	}
	return wellKnownAuthorityHosts[strings.ToLower(u.Hostname())]
}

// AuthMethod names the login method chosen from the configuration.
type AuthMethod string

// Login methods, in precedence order (the existing provider's; config.Config.LoginMethods).
const (
	AuthWorkloadIdentity  AuthMethod = config.LoginWorkloadIdentity
	AuthManagedIdentity   AuthMethod = config.LoginManagedIdentity
	AuthClientSecret      AuthMethod = config.LoginClientSecret
	AuthClientCertificate AuthMethod = config.LoginClientCertificate
)

// ChooseAuthMethod picks the login method from azure.json: the first configured in the order of
// precedence (others are ignored; config.Config.LoginWarning names them).
func ChooseAuthMethod(cfg *config.Config) (AuthMethod, error) {
	if m, ok := cfg.LoginMethod(); ok {
		return AuthMethod(m.Name), nil
	}
	return "", fmt.Errorf("no credentials configured: set aadClientId with aadClientSecret or aadClientCertPath, " +
		"useManagedIdentityExtension, or aadFederatedTokenFile (AZURE_FEDERATED_TOKEN_FILE)")
}

// maxCredentialFile bounds the certificate and token files read (a PFX with a chain is a few KB).
const maxCredentialFile = 1 << 20

// CheckCredentials reads the local credential material of the chosen login method without any
// network call: the certificate file (and its password), the federated token file. Problems
// there do not heal by retrying, so they are configuration errors naming the key.
func CheckCredentials(cfg *config.Config) error {
	method, err := ChooseAuthMethod(cfg)
	if err != nil {
		return config.Invalid(err)
	}
	switch method {
	case AuthClientCertificate:
		_, _, err := loadCertificate(cfg)
		return err
	case AuthWorkloadIdentity:
		tok, err := readSmallFile(cfg.AADFederatedTokenFile, maxCredentialFile)
		if err != nil {
			return config.Invalid(fmt.Errorf("aadFederatedTokenFile (or %s): %w", config.EnvFederatedTokenFile, err))
		}
		if len(strings.TrimSpace(string(tok))) == 0 {
			return config.Invalid(fmt.Errorf("aadFederatedTokenFile (or %s): %s is empty", config.EnvFederatedTokenFile, cfg.AADFederatedTokenFile))
		}
	}
	return nil
}

// loadCertificate reads and decodes aadClientCertPath (PEM, or PKCS#12 with aadClientCertPassword).
func loadCertificate(cfg *config.Config) ([]*x509.Certificate, crypto.PrivateKey, error) {
	data, err := readSmallFile(cfg.AADClientCertPath, maxCredentialFile+1)
	if err != nil {
		return nil, nil, config.Invalid(fmt.Errorf("aadClientCertPath: %w", err))
	}
	if len(data) > maxCredentialFile {
		return nil, nil, config.Invalid(fmt.Errorf("aadClientCertPath: %s is larger than %d bytes", cfg.AADClientCertPath, maxCredentialFile))
	}
	certs, key, err := azidentity.ParseCertificates(data, []byte(cfg.AADClientCertPassword.Value()))
	if err != nil {
		// Name the file and key; the parser's message is scrubbed all the same.
		return nil, nil, config.Invalid(fmt.Errorf("aadClientCertPath %s: cannot read certificate and key (check aadClientCertPassword; "+
			"PKCS#12 files must use the legacy 3DES/RC2 encryption): %s", cfg.AADClientCertPath, NewScrubber(cfg, nil).Scrub(err.Error())))
	}
	if len(certs) == 0 || key == nil {
		return nil, nil, config.Invalid(fmt.Errorf("aadClientCertPath %s: holds no certificate and private key", cfg.AADClientCertPath))
	}
	return certs, key, nil
}

// NewCredential builds the azidentity credential for the configured login method and cloud.
// transport (optional) is the HTTP client for token requests. Errors never contain a secret.
func NewCredential(cfg *config.Config, env config.Environment, transport policy.Transporter) (azcore.TokenCredential, AuthMethod, error) {
	method, err := ChooseAuthMethod(cfg)
	if err != nil {
		return nil, "", config.Invalid(err)
	}
	if method != AuthManagedIdentity && env.ActiveDirectoryEndpoint != "" {
		// The login server receives the secret or the signed assertion: TLS only.
		if err := config.CheckHTTPSURL(env.ActiveDirectoryEndpoint); err != nil {
			return nil, method, config.Invalid(fmt.Errorf("login endpoint (activeDirectoryEndpoint): %w", err))
		}
	}
	co := azcore.ClientOptions{Cloud: env.CloudConfiguration(), Transport: transport}
	disableDiscovery := !IsWellKnownAuthorityHost(env.ActiveDirectoryEndpoint)

	var cred azcore.TokenCredential
	switch method {
	case AuthWorkloadIdentity:
		cred, err = azidentity.NewWorkloadIdentityCredential(&azidentity.WorkloadIdentityCredentialOptions{
			ClientOptions: co, ClientID: cfg.AADClientID, TenantID: cfg.TenantID,
			TokenFilePath: cfg.AADFederatedTokenFile, DisableInstanceDiscovery: disableDiscovery,
		})
	case AuthManagedIdentity:
		opts := &azidentity.ManagedIdentityCredentialOptions{ClientOptions: co}
		if id := cfg.UserAssignedIdentityID; id != "" {
			if strings.Contains(strings.ToLower(id), "/subscriptions/") {
				opts.ID = azidentity.ResourceID(id)
			} else {
				opts.ID = azidentity.ClientID(id)
			}
		}
		cred, err = azidentity.NewManagedIdentityCredential(opts)
	case AuthClientSecret:
		cred, err = azidentity.NewClientSecretCredential(cfg.TenantID, cfg.AADClientID, cfg.AADClientSecret.Value(),
			&azidentity.ClientSecretCredentialOptions{ClientOptions: co, DisableInstanceDiscovery: disableDiscovery})
	case AuthClientCertificate:
		certs, key, lerr := loadCertificate(cfg)
		if lerr != nil {
			return nil, method, lerr
		}
		cred, err = azidentity.NewClientCertificateCredential(cfg.TenantID, cfg.AADClientID, certs, key,
			&azidentity.ClientCertificateCredentialOptions{ClientOptions: co, SendCertificateChain: true,
				DisableInstanceDiscovery: disableDiscovery})
	}
	scrubber := NewScrubber(cfg, nil)
	if err != nil {
		// Building a credential makes no network call: what fails here is the configuration.
		return nil, method, config.Invalid(fmt.Errorf("%s login: %s", method, scrubber.Scrub(err.Error())))
	}
	return &scrubbedCredential{cred: cred, method: method, scrubber: scrubber}, method, nil
}
