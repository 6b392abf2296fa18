package identity

import (
	"crypto/sha1" //nolint:gosec // G505: the JWT x5t header is a SHA-1 thumbprint by definition
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// verifyAssertion checks a jwt-bearer client_assertion for client cl. A certificate assertion
// (header x5t or x5t#S256, issuer = subject = client ID) must be signed by one of the client's
// configured certificates; any other assertion is a federated (workload identity) token, which
// must match the client's federated credential: signed by one of the issuer's keys, with its
// issuer, subject and an accepted audience, unexpired. Errors carry Entra's AADSTS codes.
func verifyAssertion(cl Client, assertion string, now jwtTime) error {
	parser := jwt.NewParser(jwt.WithTimeFunc(now), jwt.WithExpirationRequired())
	var claims jwt.RegisteredClaims
	if _, _, err := parser.ParseUnverified(assertion, &claims); err != nil {
		return fmt.Errorf("AADSTS50027: client_assertion is not a JWT: %w", err)
	}
	if isCertificateAssertion(assertion) {
		return verifyCertAssertion(cl, assertion, now)
	}
	if !cl.Federated {
		return fmt.Errorf("AADSTS700016: client %s has no federated identity credential", cl.ClientID)
	}
	return verifyFederated(cl, assertion, now)
}

// verifyFederated checks a federated token the way Entra ID checks it against a federated
// identity credential: issuer first, then signature with the issuer's keys, subject, audience
// and lifetime.
func verifyFederated(cl Client, assertion string, now jwtTime) error {
	var unverified jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(assertion, &unverified); err != nil {
		return fmt.Errorf("AADSTS50027: client_assertion is not a JWT: %w", err)
	}
	if unverified.Issuer != cl.FederatedIssuer {
		return fmt.Errorf("AADSTS700211: No matching federated identity record found for presented assertion issuer %q", unverified.Issuer)
	}
	keys, err := cl.federatedKeys()
	if err != nil {
		return err
	}
	var claims jwt.RegisteredClaims
	_, err = jwt.ParseWithClaims(assertion, &claims, func(t *jwt.Token) (any, error) {
		// A service-account token names its key by kid; azsim tries each configured key.
		set := jwt.VerificationKeySet{}
		for _, k := range keys {
			set.Keys = append(set.Keys, k)
		}
		return set, nil
	}, jwt.WithValidMethods([]string{"RS256", "RS384", "RS512", "PS256", "ES256", "ES384"}), jwt.WithTimeFunc(now),
		jwt.WithExpirationRequired(), jwt.WithIssuer(cl.FederatedIssuer))
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return fmt.Errorf("AADSTS700024: Client assertion is not within its valid time range")
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable), errors.Is(err, jwt.ErrTokenInvalidId):
		return fmt.Errorf("AADSTS50013: Assertion failed signature validation (no key of issuer %q verifies it)", cl.FederatedIssuer)
	case err != nil:
		return fmt.Errorf("AADSTS50013: federated assertion rejected: %w", err)
	}
	if claims.Subject != cl.FederatedSubject {
		return fmt.Errorf("AADSTS700213: No matching federated identity record found for presented assertion subject %q", claims.Subject)
	}
	for _, want := range cl.federatedAudiences() {
		for _, got := range claims.Audience {
			if got == want {
				return nil
			}
		}
	}
	return fmt.Errorf("AADSTS700212: No matching federated identity record found for presented assertion audience %q", []string(claims.Audience))
}

type jwtTime = func() time.Time

func verifyCertAssertion(cl Client, assertion string, now jwtTime) error {
	certs, err := cl.certificates()
	if err != nil {
		return err
	}
	if len(certs) == 0 {
		return fmt.Errorf("client %s has no certificate credential", cl.ClientID)
	}
	var claims jwt.RegisteredClaims
	_, err = jwt.ParseWithClaims(assertion, &claims, func(t *jwt.Token) (any, error) {
		c := matchThumbprint(certs, t.Header)
		if c == nil {
			return nil, fmt.Errorf("the assertion's thumbprint matches no certificate of client %s", cl.ClientID)
		}
		return c.PublicKey, nil
	}, jwt.WithValidMethods([]string{"RS256", "PS256", "ES256"}), jwt.WithTimeFunc(now), jwt.WithExpirationRequired())
	if err != nil {
		return fmt.Errorf("certificate assertion rejected: %w", err)
	}
	if !strings.EqualFold(claims.Issuer, cl.ClientID) || !strings.EqualFold(claims.Subject, cl.ClientID) {
		return fmt.Errorf("certificate assertion iss/sub must be the client ID %s", cl.ClientID)
	}
	return nil
}

func matchThumbprint(certs []*x509.Certificate, header map[string]any) *x509.Certificate {
	for _, c := range certs {
		s1 := sha1.Sum(c.Raw) //nolint:gosec // G401: x5t is defined as SHA-1; no security rests on it here
		s256 := sha256.Sum256(c.Raw)
		for key, sum := range map[string][]byte{"x5t": s1[:], "x5t#S256": s256[:]} {
			v, _ := header[key].(string)
			if v == "" {
				continue
			}
			// MSAL writes standard base64; RFC 7515 says base64url. Accept both.
			for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawURLEncoding, base64.URLEncoding, base64.RawStdEncoding} {
				if got, err := enc.DecodeString(v); err == nil && string(got) == string(sum) {
					return c
				}
			}
		}
	}
	return nil
}
