package identity

import (
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// verifyAssertion checks a jwt-bearer client_assertion for client cl. A certificate assertion
// (header x5t or x5t#S256, issuer = subject = client ID) must be signed by one of the client's
// configured certificates; any other assertion is a federated (workload identity) token,
// accepted when the client is federated, well-formed and unexpired.
func verifyAssertion(cl Client, assertion string, now jwtTime) error {
	parser := jwt.NewParser(jwt.WithTimeFunc(now), jwt.WithExpirationRequired())
	var claims jwt.RegisteredClaims
	tok, _, err := parser.ParseUnverified(assertion, &claims)
	if err != nil {
		return fmt.Errorf("client_assertion is not a JWT: %v", err)
	}
	_, hasX5t := tok.Header["x5t"]
	_, hasX5tS256 := tok.Header["x5t#S256"]
	if hasX5t || hasX5tS256 {
		return verifyCertAssertion(cl, assertion, now)
	}
	if !cl.Federated {
		return fmt.Errorf("client %s accepts no federated credentials", cl.ClientID)
	}
	// azsim cannot fetch the service-account issuer's keys, so the signature is not checked;
	// the expiry and the optional subject are.
	if err := jwt.NewValidator(jwt.WithTimeFunc(now), jwt.WithExpirationRequired()).Validate(claims); err != nil {
		return fmt.Errorf("federated token rejected: %v", err)
	}
	if cl.FederatedSubject != "" && claims.Subject != cl.FederatedSubject {
		return fmt.Errorf("federated token subject %q does not match %q", claims.Subject, cl.FederatedSubject)
	}
	return nil
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
		return fmt.Errorf("certificate assertion rejected: %v", err)
	}
	if !strings.EqualFold(claims.Issuer, cl.ClientID) || !strings.EqualFold(claims.Subject, cl.ClientID) {
		return fmt.Errorf("certificate assertion iss/sub must be the client ID %s", cl.ClientID)
	}
	return nil
}

func matchThumbprint(certs []*x509.Certificate, header map[string]any) *x509.Certificate {
	for _, c := range certs {
		s1 := sha1.Sum(c.Raw)
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
