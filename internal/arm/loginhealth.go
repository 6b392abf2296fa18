package arm

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// Entra ID answers that no retry heals: the application or its secret or certificate is not
// accepted, or the tenant does not exist. AADSTS codes are read from the description because
// Entra ID sends several of them with the generic invalid_request.
var (
	refusedCodes   = []string{"invalid_client", "unauthorized_client", "invalid_tenant"}
	refusedAADSTSs = map[string]string{
		"AADSTS90002":   "the tenant does not exist",
		"AADSTS900023":  "the tenant ID is not valid",
		"AADSTS700016":  "the application is not found in the tenant",
		"AADSTS7000215": "the client secret is not valid",
		"AADSTS7000222": "the client secret has expired",
		"AADSTS700027":  "the client certificate is not accepted",
	}
	aadsts = regexp.MustCompile(`AADSTS[0-9]+`)
)

// refusedLogin says why a login server's answer is a configuration error ("" when it is not):
// credentials refused, an unknown tenant or application.
func refusedLogin(status int, code, desc string) string {
	if status != http.StatusBadRequest && status != http.StatusUnauthorized {
		return ""
	}
	for _, c := range aadsts.FindAllString(desc, -1) {
		if why, ok := refusedAADSTSs[c]; ok {
			return why + " (" + c + ")"
		}
	}
	for _, c := range refusedCodes {
		if strings.EqualFold(code, c) {
			return "the login server refuses the credentials (" + c + ")"
		}
	}
	return ""
}

// untrustedServer says why err is a configuration error when the login server's TLS
// certificate was not accepted ("" otherwise): a retry meets the same certificate.
func untrustedServer(err error) string {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	switch {
	case errors.As(err, &hostname):
		return "the login server's TLS certificate is not valid for its host name"
	case errors.As(err, &verify), errors.As(err, &unknown), errors.As(err, &invalid):
		return "the login server's TLS certificate is not trusted"
	}
	// MSAL formats the transport's error into its own with %v: only the text is left, and
	// crypto/tls and crypto/x509 word it the same in every release.
	text := err.Error()
	switch {
	case strings.Contains(text, "x509: certificate is valid for"), strings.Contains(text, "x509: certificate is not valid for any names"):
		return "the login server's TLS certificate is not valid for its host name"
	case strings.Contains(text, "tls: failed to verify certificate"), strings.Contains(text, "x509: certificate signed by unknown authority"):
		return "the login server's TLS certificate is not trusted"
	}
	return ""
}

// LoginHealth follows the outcome of token requests: whether logins have been failing with a
// configuration error, since when, and with what. Transient failures and successes end such a
// run. The CCM reports it on /healthz and steps down when it lasts (see provider).
type LoginHealth struct {
	mu    sync.Mutex
	now   func() time.Time
	since time.Time
	err   *LoginError
}

// NewLoginHealth returns a LoginHealth on the clock now (nil: time.Now).
func NewLoginHealth(now func() time.Time) *LoginHealth {
	if now == nil {
		now = time.Now
	}
	return &LoginHealth{now: now}
}

// Misconfigured returns the configuration error token requests have failed with, without a
// success or another kind of failure since, and when that began; nil when there is none.
func (h *LoginHealth) Misconfigured() (since time.Time, err *LoginError) {
	if h == nil {
		return time.Time{}, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.since, h.err
}

func (h *LoginHealth) record(err error) {
	if h == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return // cut short by the caller: says nothing about the login
	}
	var le *LoginError
	h.mu.Lock()
	defer h.mu.Unlock()
	if !errors.As(err, &le) || le.Misconfigured == "" {
		h.since, h.err = time.Time{}, nil
		return
	}
	if h.err == nil {
		h.since = h.now()
	}
	h.err = le
}

// watchedCredential records every token request's outcome in health.
type watchedCredential struct {
	cred   azcore.TokenCredential
	health *LoginHealth
}

func (c *watchedCredential) GetToken(ctx context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	tok, err := c.cred.GetToken(ctx, o)
	c.health.record(err)
	return tok, err
}
