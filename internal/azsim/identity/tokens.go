package identity

import (
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Claims are what azsim puts in (and reads back from) its access tokens.
type Claims struct {
	TenantID string `json:"tid"`
	AppID    string `json:"appid,omitempty"`
	ObjectID string `json:"oid,omitempty"`
	// IDType is "app" for service principals and managed identities, as Entra ID writes it.
	IDType string `json:"idtyp,omitempty"`
	jwt.RegisteredClaims
}

// Issuer signs and verifies access tokens with a per-process HMAC key (HS256). Tokens are only
// meaningful to this azsim instance; restart with the same key to keep them valid.
type Issuer struct {
	key      []byte
	Lifetime time.Duration
	// Now is the clock; tests move it.
	Now func() time.Time
	// Audiences accepted by Validate, compared without trailing slashes. Empty accepts any.
	Audiences []string
}

// NewIssuer returns an issuer with a random key (or the given one) and a one-hour lifetime.
func NewIssuer(key []byte) *Issuer {
	if len(key) == 0 {
		key = make([]byte, 32)
		_, _ = rand.Read(key)
	}
	return &Issuer{key: key, Lifetime: time.Hour, Now: time.Now}
}

// Key returns the signing key, so a restarted server can keep accepting old tokens.
func (i *Issuer) Key() []byte { return append([]byte(nil), i.key...) }

// Issue returns a signed token for subject (app) in tenant with the given audience.
func (i *Issuer) Issue(issuer, tenant, appID, objectID, audience string) (token string, expires time.Time, err error) {
	now := i.Now()
	expires = now.Add(i.Lifetime).Truncate(time.Second)
	c := Claims{
		TenantID: tenant,
		AppID:    appID,
		ObjectID: objectID,
		IDType:   "app",
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    issuer,
			Subject:   objectID,
			Audience:  jwt.ClaimStrings{audience},
			IssuedAt:  jwt.NewNumericDate(now),
			NotBefore: jwt.NewNumericDate(now.Add(-5 * time.Minute)),
			ExpiresAt: jwt.NewNumericDate(expires),
			ID:        randomID(),
		},
	}
	token, err = jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(i.key)
	return token, expires, err
}

// Token validation failures, mapped to ARM's error codes by AuthError.
var (
	ErrMissingToken = errors.New("the 'Authorization' header is missing")
	ErrInvalidToken = errors.New("the access token is invalid")
	ErrExpiredToken = errors.New("the access token has expired")
	ErrBadAudience  = errors.New("the access token has an audience this server does not accept")
)

// Parse verifies a token's signature, expiry and audience.
func (i *Issuer) Parse(token string) (*Claims, error) {
	var c Claims
	_, err := jwt.ParseWithClaims(token, &c, func(t *jwt.Token) (any, error) { return i.key, nil },
		jwt.WithValidMethods([]string{"HS256"}), jwt.WithTimeFunc(i.Now), jwt.WithExpirationRequired())
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return nil, ErrExpiredToken
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	if len(i.Audiences) > 0 && !audienceAccepted(i.Audiences, c.Audience) {
		return nil, ErrBadAudience
	}
	return &c, nil
}

func audienceAccepted(accepted []string, got jwt.ClaimStrings) bool {
	for _, a := range accepted {
		for _, g := range got {
			if strings.EqualFold(strings.TrimRight(a, "/"), strings.TrimRight(g, "/")) {
				return true
			}
		}
	}
	return false
}

func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
