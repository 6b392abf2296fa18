package arm

import (
	"strings"
	"testing"

	"github.com/azure-ccm/azure-ccm/internal/config"
)

func TestIsWellKnownAuthorityHost(t *testing.T) {
	for host, want := range map[string]bool{
		"https://login.microsoftonline.com/":   true,
		"https://LOGIN.chinacloudapi.cn":       true,
		"https://127.0.0.1:8443/":              false,
		"https://login.azsim.local/tenant":     false,
		"https://adfs.contoso.local/adfs":      false,
		"https://login.microsoftonline.us:443": true,
	} {
		if got := IsWellKnownAuthorityHost(host); got != want {
			t.Errorf("%s: got %v", host, got)
		}
	}
}

func TestChooseAuthMethodPrecedence(t *testing.T) {
	cases := []struct {
		cfg  config.Config
		want AuthMethod
	}{
		{config.Config{UseFederatedWorkloadIdentityExtension: true, UseManagedIdentityExtension: true, AADClientSecret: "x"}, AuthWorkloadIdentity},
		{config.Config{UseManagedIdentityExtension: true, AADClientSecret: "x"}, AuthManagedIdentity},
		{config.Config{AADClientSecret: "x", AADClientCertPath: "/c"}, AuthClientSecret},
		{config.Config{AADClientCertPath: "/c"}, AuthClientCertificate},
	}
	for _, tc := range cases {
		got, err := ChooseAuthMethod(&tc.cfg)
		if err != nil || got != tc.want {
			t.Errorf("%+v: got %v %v", tc.cfg, got, err)
		}
	}
	if _, err := ChooseAuthMethod(&config.Config{}); err == nil {
		t.Error("no credentials must be an error")
	}
}

func TestCredentialErrorsDoNotLeakSecrets(t *testing.T) {
	env := config.Environment{ActiveDirectoryEndpoint: "https://login.local/", ResourceManagerEndpoint: "https://arm.local/", TokenAudience: "https://aud/"}
	cfg := &config.Config{TenantID: "t", AADClientID: "c", AADClientCertPath: "/does/not/exist", AADClientCertPassword: "pfx-pass-123"}
	_, _, err := NewCredential(cfg, env, nil)
	if err == nil || !strings.Contains(err.Error(), "aadClientCertPath") || strings.Contains(err.Error(), "pfx-pass-123") {
		t.Fatalf("got %v", err)
	}
	cfg = &config.Config{TenantID: "bad tenant!", AADClientID: "c", AADClientSecret: "s3cr3t"}
	_, _, err = NewCredential(cfg, env, nil)
	if err != nil && strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("secret leaked: %v", err)
	}
}
