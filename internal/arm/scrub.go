package arm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/azure-ccm/azure-ccm/internal/config"
)

// Login errors travel far: the start-up log at level 0, Service events (through every ARM call
// that needs a token), controller logs. azidentity's own messages quote the login server's whole
// answer, and a server that echoes the request (a proxy error page, a misbehaving private cloud)
// puts the client secret or the federated token in it. So a login error is rebuilt from its parts
// (credential, URL without query, HTTP status, Entra's error code and description) and every
// credential the process holds is removed from what is kept.

// maxDescription bounds how much of the login server's error description is kept.
const maxDescription = 300

// jwtLike matches compact JWS tokens (federated tokens, client assertions, access tokens): three
// base64url parts, the first starting like a JSON header.
var jwtLike = regexp.MustCompile(`eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*`)

// redactedText replaces every removed value.
const redactedText = "REDACTED"

// Scrubber removes credentials from text.
type Scrubber struct {
	// values returns the credentials to remove, read when needed (a federated token file is
	// rotated while the process runs).
	values func() []string
}

// NewScrubber returns a scrubber for the credentials of cfg: client secret, certificate
// password, the current federated token, and the managed-identity header of the environment.
func NewScrubber(cfg *config.Config, getenv func(string) string) *Scrubber {
	if getenv == nil {
		getenv = os.Getenv
	}
	return &Scrubber{values: func() []string {
		vs := []string{cfg.AADClientSecret.Value(), cfg.AADClientCertPassword.Value(), getenv("IDENTITY_HEADER")}
		if f := cfg.AADFederatedTokenFile; f != "" {
			if tok, err := readSmallFile(f, 64<<10); err == nil {
				vs = append(vs, strings.TrimSpace(string(tok)))
			}
		}
		return vs
	}}
}

func readSmallFile(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit))
}

// Scrub returns s without any credential, in any of the encodings a request or an echo of it
// may carry (plain, form/URL-encoded, JSON-escaped), and without JWTs.
func (s *Scrubber) Scrub(text string) string {
	if s != nil && s.values != nil {
		for _, v := range s.values() {
			// Very short values would blank out ordinary words; no real secret is that short.
			if len(v) < 4 {
				continue
			}
			for _, form := range encodings(v) {
				text = strings.ReplaceAll(text, form, redactedText)
			}
		}
	}
	return jwtLike.ReplaceAllString(text, redactedText)
}

func encodings(v string) []string {
	js, _ := json.Marshal(v)
	out := []string{v, url.QueryEscape(v), url.PathEscape(v), strings.Trim(string(js), `"`)}
	// Longest first, so that a form containing another is replaced whole.
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if len(out[j]) > len(out[i]) {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// LoginError is a failed token request, with nothing of the credential in it.
type LoginError struct {
	Method AuthMethod
	// StatusCode is the login server's HTTP status (0: no answer).
	StatusCode int
	// Code is Entra ID's error ("invalid_client") when the answer had one.
	Code string
	msg  string
	// cause is kept only when it is a context error, for errors.Is.
	cause error
}

func (e *LoginError) Error() string { return e.msg }

// Unwrap exposes context cancellation and deadline only: the original error's text is what is
// being kept out of sight.
func (e *LoginError) Unwrap() error { return e.cause }

// NonRetriable tells azcore's retry policy not to retry the ARM request: the credential has
// already retried the token request itself.
func (e *LoginError) NonRetriable() {}

// scrubbedCredential rebuilds every GetToken error as a LoginError.
type scrubbedCredential struct {
	cred     azcore.TokenCredential
	method   AuthMethod
	scrubber *Scrubber
}

func (c *scrubbedCredential) GetToken(ctx context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	tok, err := c.cred.GetToken(ctx, o)
	if err != nil {
		return tok, newLoginError(c.method, err, c.scrubber)
	}
	if tok.Token == "" {
		// Seen with managed identity: a 200 answer without access_token is taken as a token.
		return azcore.AccessToken{}, &LoginError{Method: c.method, msg: fmt.Sprintf("%s login failed: the answer has no access_token", c.method)}
	}
	return tok, nil
}

// newLoginError builds the message from the parts of err that carry no credential.
func newLoginError(method AuthMethod, err error, s *Scrubber) *LoginError {
	le := &LoginError{Method: method}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		le.cause = ctxErr(err)
	}
	var afe *azidentity.AuthenticationFailedError
	if errors.As(err, &afe) && afe.RawResponse != nil {
		resp := afe.RawResponse
		le.StatusCode = resp.StatusCode
		where := ""
		if resp.Request != nil && resp.Request.URL != nil {
			u := resp.Request.URL
			where = fmt.Sprintf(" from %s %s://%s%s", resp.Request.Method, u.Scheme, u.Host, u.Path)
		}
		code, desc := describeLoginAnswer(resp)
		// Scrubbed before it is cut: a cut through a secret would leave its first half.
		code, desc = truncate(oneLine(s.Scrub(code)), 64), truncate(oneLine(s.Scrub(desc)), maxDescription)
		le.Code = code
		msg := fmt.Sprintf("%s login failed: HTTP %d%s", method, resp.StatusCode, s.Scrub(where))
		if code != "" {
			msg += ": " + code
		}
		if desc != "" {
			msg += ": " + desc
		}
		le.msg = s.Scrub(msg)
		return le
	}
	// No answer (connection refused, TLS, timeout), an answer MSAL could not decode, or a local
	// problem: the message is the library's, without the answer MSAL quotes, scrubbed and
	// bounded.
	text := err.Error()
	if i := strings.Index(text, "raw message was:"); i >= 0 {
		text = text[:i] + "(answer not shown)"
	}
	le.msg = s.Scrub(fmt.Sprintf("%s login failed: %s", method, truncate(oneLine(s.Scrub(text)), 2*maxDescription)))
	return le
}

func ctxErr(err error) error {
	if errors.Is(err, context.Canceled) {
		return context.Canceled
	}
	return context.DeadlineExceeded
}

// describeLoginAnswer reads the error code and description of an Entra ID (`error`,
// `error_description`) or managed-identity (`error`/`message`) answer. A body that is not JSON
// is only measured: it is not Entra's, and its content is unknown.
func describeLoginAnswer(resp *http.Response) (code, desc string) {
	body, err := runtime.Payload(resp)
	if err != nil || len(body) == 0 {
		return "", "empty answer"
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		return "", fmt.Sprintf("the answer is not JSON (%d bytes, %s; not shown)", len(body), contentType(resp))
	}
	str := func(keys ...string) string {
		for _, k := range keys {
			if v, ok := doc[k].(string); ok && v != "" {
				return v
			}
		}
		return ""
	}
	code = str("error", "code")
	desc = str("error_description", "message", "Message")
	if code == "" && desc == "" {
		if resp.StatusCode == http.StatusOK {
			return "", "the answer has no access_token"
		}
		return "", "the answer names no error"
	}
	return code, desc
}

// contentType is the answer's media type alone ("text/html"), nothing the server chose freely.
func contentType(resp *http.Response) string {
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || mt == "" || len(mt) > 64 {
		return "no usable content type"
	}
	return mt
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && (s[cut]&0xC0) == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
