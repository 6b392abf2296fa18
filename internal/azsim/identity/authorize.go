package identity

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// AuthError is a refused ARM request. It carries the status and ARM error code to answer with.
type AuthError struct {
	Status  int
	Code    string
	Message string
}

func (e *AuthError) Error() string { return e.Code + ": " + e.Message }

// WriteTo writes the ARM error response for e.
func (e *AuthError) WriteTo(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("x-ms-failure-cause", "gateway")
	w.Header().Set("WWW-Authenticate", `Bearer authorization_uri="https://login.microsoftonline.com/", error="invalid_token", error_description="`+e.Message+`"`)
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": e.Code, "message": e.Message}})
}

// Authorize checks the request's bearer token and, for a request inside a subscription, that
// the token's tenant is the subscription's and, for a write in a subscription outside the home
// tenant, that a home-tenant token comes along in x-ms-authorization-auxiliary. It returns nil
// or an *AuthError.
func (s *Service) Authorize(r *http.Request) error {
	claims, err := s.Issuer.authorize(r)
	if err != nil {
		return err
	}
	sub := subscriptionOf(r.URL.Path)
	if sub == "" {
		return nil
	}
	creds := s.Credentials()
	want := creds.TenantOf(sub)
	if !strings.EqualFold(claims.TenantID, want) {
		return &AuthError{Status: http.StatusUnauthorized, Code: "InvalidAuthenticationTokenTenant", Message: fmt.Sprintf(
			"The access token is from the wrong issuer '%s'. It must match the tenant '%s/%s/' associated with this subscription. "+
				"Please use the authority (URL) '%s/%s' to get the token.", claims.Issuer, BaseURL(r), want, BaseURL(r), want)}
	}
	if strings.EqualFold(want, creds.TenantID) || r.Method == http.MethodGet || r.Method == http.MethodHead {
		return nil
	}
	// A write in a subscription of another tenant links its resources to the home tenant's
	// (a load balancer's pool to the cluster's NICs): Azure then wants a home-tenant token as
	// well. azsim asks for it on every such write, stricter than Azure, never laxer.
	for _, v := range strings.Split(r.Header.Get(HeaderAuxiliary), ",") {
		scheme, tok, ok := strings.Cut(strings.TrimSpace(v), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			continue
		}
		if aux, err := s.Issuer.Parse(strings.TrimSpace(tok)); err == nil && strings.EqualFold(aux.TenantID, creds.TenantID) {
			return nil
		}
	}
	return &AuthError{Status: http.StatusForbidden, Code: "LinkedAuthorizationFailed", Message: fmt.Sprintf(
		"Subscription '%s' is in tenant '%s': a write there links resources of tenant '%s', so the request needs a valid token of tenant '%s' in the %s header.",
		sub, want, creds.TenantID, creds.TenantID, HeaderAuxiliary)}
}

// HeaderAuxiliary carries tokens of further tenants.
const HeaderAuxiliary = "x-ms-authorization-auxiliary"

// subscriptionOf is the subscription ID of an ARM path ("" outside subscriptions).
func subscriptionOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) >= 2 && strings.EqualFold(parts[0], "subscriptions") {
		return parts[1]
	}
	return ""
}

// Claims returns the claims of the request's valid bearer token.
func (s *Service) Claims(r *http.Request) (*Claims, error) { return s.Issuer.authorize(r) }

// Authorize checks the request's bearer token (signature, expiry, audience), whatever the
// tenant. It returns nil or an *AuthError.
func (i *Issuer) Authorize(r *http.Request) error {
	_, err := i.authorize(r)
	return err
}

func (i *Issuer) authorize(r *http.Request) (*Claims, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return nil, &AuthError{http.StatusUnauthorized, "AuthenticationFailed", "Authentication failed. The 'Authorization' header is missing."}
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return nil, &AuthError{http.StatusUnauthorized, "AuthenticationFailed", "Authentication failed. The 'Authorization' header is provided in an invalid format."}
	}
	claims, err := i.Parse(strings.TrimSpace(token))
	switch {
	case err == nil:
		return claims, nil
	case errors.Is(err, ErrExpiredToken):
		return nil, &AuthError{http.StatusUnauthorized, "ExpiredAuthenticationToken", "The access token expiry UTC time is earlier than current UTC time."}
	case errors.Is(err, ErrBadAudience):
		return nil, &AuthError{http.StatusUnauthorized, "InvalidAuthenticationToken", "The access token has been obtained for wrong audience or resource."}
	default:
		return nil, &AuthError{http.StatusUnauthorized, "InvalidAuthenticationToken", "The access token is invalid."}
	}
}
