package arm

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestRefusedLogin(t *testing.T) {
	cases := []struct {
		status     int
		code, desc string
		want       string
	}{
		{401, "invalid_client", "AADSTS7000215: Invalid client secret provided.", "the client secret is not valid (AADSTS7000215)"},
		{401, "invalid_client", "something else", "the login server refuses the credentials (invalid_client)"},
		{400, "unauthorized_client", "", "the login server refuses the credentials (unauthorized_client)"},
		{400, "invalid_request", "AADSTS90002: Tenant 'x' not found.", "the tenant does not exist (AADSTS90002)"},
		{400, "invalid_request", "AADSTS700016: Application with identifier 'y' was not found", "the application is not found in the tenant (AADSTS700016)"},
		{400, "invalid_request", "AADSTS50011: something a retry may not heal but we do not know", ""},
		{500, "invalid_client", "AADSTS7000215", ""},
		{503, "temporarily_unavailable", "", ""},
		{429, "", "", ""},
	}
	for _, c := range cases {
		if got := refusedLogin(c.status, c.code, c.desc); got != c.want {
			t.Errorf("refusedLogin(%d, %q, %q) = %q, want %q", c.status, c.code, c.desc, got, c.want)
		}
	}
}

func TestUntrustedServer(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("Post: %w", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), true},
		{fmt.Errorf("Post: %w", x509.UnknownAuthorityError{}), true},
		{fmt.Errorf("Post: %w", x509.HostnameError{Certificate: &x509.Certificate{}, Host: "login.example"}), true},
		{fmt.Errorf("Post: %w", x509.CertificateInvalidError{Reason: x509.Expired}), true},
		{errors.New(`ClientSecretCredential: server response error: Post "https://login/t/oauth2/v2.0/token": tls: failed to verify certificate: x509: certificate signed by unknown authority`), true},
		{errors.New("Post: x509: certificate is valid for a.example, not b.example"), true},
		{errors.New("dial tcp: connection refused"), false},
		{context.DeadlineExceeded, false},
	}
	for _, c := range cases {
		if got := untrustedServer(c.err) != ""; got != c.want {
			t.Errorf("untrustedServer(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// A run of configuration errors keeps its start; a success or a transient failure ends it; a
// caller's cancellation says nothing.
func TestLoginHealth(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	h := NewLoginHealth(func() time.Time { return now })
	bad := &LoginError{Misconfigured: "the login server's TLS certificate is not trusted", msg: "x"}
	transient := &LoginError{StatusCode: 503, msg: "y"}
	step := func(err error, wantSince time.Time, wantErr bool) {
		t.Helper()
		h.record(err)
		since, got := h.Misconfigured()
		if (got != nil) != wantErr || (wantErr && !since.Equal(wantSince)) {
			t.Fatalf("after %v: Misconfigured = %v, %v; want error %v since %v", err, since, got, wantErr, wantSince)
		}
		now = now.Add(time.Minute)
	}
	t0 := now
	step(bad, t0, true)
	step(bad, t0, true)
	step(context.Canceled, t0, true)
	step(transient, time.Time{}, false)
	t4 := now
	step(bad, t4, true)
	step(nil, time.Time{}, false)
	var none *LoginHealth
	if _, err := none.Misconfigured(); err != nil {
		t.Error("a nil LoginHealth reports an error")
	}
}
