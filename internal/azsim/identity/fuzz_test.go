package identity

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// FuzzTokenForm: any token request gets an answer, never a server error; a token is issued
// only for the right secret, and no answer shows the client_secret that was sent.
func FuzzTokenForm(f *testing.F) {
	fx := newFixture(f)
	mux := http.NewServeMux()
	fx.svc.Register(mux)
	for _, s := range []string{
		"grant_type=client_credentials&client_id=sp-secret&client_secret=s3cret&scope=https%3A%2F%2Fmanagement.azure.com%2F.default",
		"grant_type=client_credentials&client_id=sp-secret&client_secret=wrong-secret&scope=x",
		"grant_type=client_credentials&client_id=sp-wi&client_assertion_type=urn%3Aietf%3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer&client_assertion=eyJ.eyJ.x&scope=a%2F.default",
		"grant_type=password", "%%%", "",
	} {
		f.Add(tenant, s)
	}
	f.Fuzz(func(t *testing.T, tn, body string) {
		u := &url.URL{Path: "/" + tn + "/oauth2/v2.0/token"}
		req := httptest.NewRequest(http.MethodPost, "https://azsim"+u.EscapedPath(), strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("HTTP %d for %q", rec.Code, body)
		}
		form, _ := url.ParseQuery(body)
		secret := form.Get("client_secret")
		issued := rec.Code == http.StatusOK && strings.Contains(rec.Body.String(), "access_token")
		if issued && !(strings.EqualFold(form.Get("client_id"), "sp-secret") && secret == "s3cret") {
			t.Fatalf("a token for %q", body)
		}
		if len(secret) >= 8 && strings.Contains(rec.Body.String(), secret) {
			t.Fatalf("the answer shows the client secret: %s", rec.Body)
		}
	})
}

// FuzzClientAssertion: a client assertion is accepted only when it is signed by the client's
// certificate or, for federated clients, by the issuer's key with the credential's claims.
func FuzzClientAssertion(f *testing.F) {
	fx := newFixture(f)
	creds := fx.svc.Credentials()
	wi, _ := creds.client("sp-wi")
	cert, _ := creds.client("sp-cert")
	valid := func(sub string) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.RegisteredClaims{Issuer: saIssuer, Subject: sub,
			Audience: jwt.ClaimStrings{DefaultFederatedAudience}, ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))})
		s, _ := tok.SignedString(fx.issuerKey)
		return s
	}
	for _, s := range []string{valid(saSubject), valid("other"), "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.", "a.b.c", ""} {
		f.Add(s)
	}
	now := time.Now
	f.Fuzz(func(t *testing.T, assertion string) {
		if err := verifyAssertion(wi, assertion, now); err == nil {
			var c jwt.RegisteredClaims
			if _, _, perr := jwt.NewParser().ParseUnverified(assertion, &c); perr != nil || c.Issuer != saIssuer || c.Subject != saSubject {
				t.Fatalf("federated assertion accepted: %q", assertion)
			}
		}
		if err := verifyAssertion(cert, assertion, now); err == nil {
			t.Fatalf("certificate assertion accepted without a signature by the test: %q", assertion)
		}
	})
}
