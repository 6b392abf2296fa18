package arm

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
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

// Scrub returns text without any credential and without JWTs. A credential is found in the
// forms a request, an echo of it or a log line may carry: plain, query- and path-escaped,
// JSON-escaped, HTML-escaped, base64 (standard and URL alphabets, padded or not, at any of the
// three byte alignments a credential embedded in a larger encoded text can have), and each of
// these encodings applied twice. Letters match in either case (an upper-cased echo, %2f for %2F),
// and a cut copy is found from its first minPrefix bytes on (a message truncated by a proxy or
// a log line limit).
//
// Credentials shorter than MinSecretLength are not looked for: replacing every occurrence of a
// two-letter string would destroy the logs. Configuration refuses such client secrets and
// certificate passwords (config.Validate), so only a short IDENTITY_HEADER, which the platform
// sets, is skipped.
func (s *Scrubber) Scrub(text string) string {
	if s != nil && s.values != nil {
		var forms []string
		for _, v := range s.values() {
			if len(v) < config.MinSecretLength {
				continue
			}
			forms = append(forms, encodings(v)...)
		}
		text = redactForms(text, forms)
	}
	return jwtLike.ReplaceAllString(text, redactedText)
}

// minPrefix is the shortest cut copy of an encoded credential that is removed: long enough
// that ordinary text does not match by chance, short enough to catch a copy cut soon after
// its start.
const minPrefix = 8

// redactForms replaces every stretch of text covered by an occurrence of a form, or of a prefix
// of a form at least minPrefix bytes long, with one redactedText. Letters are compared
// case-insensitively (ASCII only, so that byte offsets stay aligned). All occurrences are found
// before anything is replaced, so that a match starting early (a prefix, or a shorter form)
// cannot cut a longer copy and leave its end behind.
func redactForms(text string, forms []string) string {
	var b strings.Builder
	last, runEnd := 0, -1 // runEnd: end of the covered stretch that started at runStart
	runStart := 0
	for i := 0; i < len(text); i++ {
		end := i
		for _, f := range forms {
			need := min(len(f), minPrefix)
			if n := commonPrefixFold(text[i:], f); n >= need && i+n > end {
				end = i + n
			}
		}
		switch {
		case i <= runEnd:
			runEnd = max(runEnd, end)
		case end > i:
			if runEnd >= 0 {
				b.WriteString(text[last:runStart])
				b.WriteString(redactedText)
				last = runEnd
			}
			runStart, runEnd = i, end
		}
	}
	if runEnd < 0 {
		return text
	}
	b.WriteString(text[last:runStart])
	b.WriteString(redactedText)
	b.WriteString(text[runEnd:])
	return b.String()
}

// commonPrefixFold is the length of the longest common prefix of a and b, ASCII letters
// compared case-insensitively.
func commonPrefixFold(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && lowerASCII(a[n]) == lowerASCII(b[n]) {
		n++
	}
	return n
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// textEncodings are the escapes a credential meets in URLs, JSON, HTML and headers.
func textEncodings() []func(string) string {
	return []func(string) string{
		url.QueryEscape,
		url.PathEscape,
		func(v string) string { js, _ := json.Marshal(v); return strings.Trim(string(js), `"`) },
		html.EscapeString,
		func(v string) string { return base64.StdEncoding.EncodeToString([]byte(v)) },
		func(v string) string { return base64.URLEncoding.EncodeToString([]byte(v)) },
	}
}

// encodings are the forms of v that Scrub removes.
func encodings(v string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(f string) {
		if len(f) >= config.MinSecretLength && !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	add(v)
	var first []string
	for _, enc := range textEncodings() {
		f := enc(v)
		first = append(first, f)
		add(f)
	}
	for _, f := range first {
		for _, enc := range textEncodings() {
			add(enc(f))
		}
	}
	for _, f := range base64Embedded(v) {
		add(f)
	}
	return out
}

// base64Embedded are the base64 characters that depend on v alone when v sits at byte offset
// 0, 1 or 2 of a larger encoded text (a form body or a header encoded whole): the characters
// that mix v with its neighbours are left out, and the rest is the same whatever surrounds v.
func base64Embedded(v string) []string {
	var out []string
	for k := 0; k < 3; k++ {
		padded := strings.Repeat("\x00", k) + v
		bits := 8 * len(padded)
		start, end := (8*k+5)/6, bits/6
		if end <= start {
			continue
		}
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			out = append(out, enc.EncodeToString([]byte(padded))[start:end])
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
	// Misconfigured says why no retry can succeed until the configuration changes (an
	// untrusted certificate, credentials refused, an unknown tenant); "" for a failure that may
	// pass (an outage, a timeout, a throttled or malformed answer).
	Misconfigured string
	msg           string
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
		le.Misconfigured = refusedLogin(resp.StatusCode, code, desc)
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
	le.Misconfigured = untrustedServer(err)
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
