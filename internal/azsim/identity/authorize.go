package identity

import (
	"encoding/json"
	"errors"
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

// Authorize checks the request's bearer token. It returns nil or an *AuthError. It fits
// arm.Config.Authorize and is also used by the middleware.
func (i *Issuer) Authorize(r *http.Request) error {
	_, err := i.authorize(r)
	return err
}

// HeaderAuxiliary carries tokens of other tenants.
const HeaderAuxiliary = "x-ms-authorization-auxiliary"

// Authorize checks the bearer token as Issuer.Authorize does, then the tenants: the token must
// be of the tenant of the subscription in the path, and a request for a subscription outside
// the home tenant must carry a home-tenant token in x-ms-authorization-auxiliary.
func (s *Service) Authorize(r *http.Request) error {
	c, err := s.Issuer.authorize(r)
	if err != nil {
		return err
	}
	sub, ok := subscriptionOf(r.URL.Path)
	if !ok {
		return nil
	}
	creds := s.Credentials()
	want := creds.subscriptionTenant(sub)
	if !strings.EqualFold(c.TenantID, want) {
		return &AuthError{http.StatusUnauthorized, "InvalidAuthenticationTokenTenant",
			"The access token is from the wrong issuer '" + c.Issuer + "'. It must match the tenant '" + want + "' associated with this subscription. Please use the authority (URL) for tenant '" + want + "' to get the token."}
	}
	if strings.EqualFold(want, creds.TenantID) {
		return nil
	}
	aux := strings.TrimSpace(r.Header.Get(HeaderAuxiliary))
	for _, v := range strings.Split(aux, ",") {
		scheme, tok, ok := strings.Cut(strings.TrimSpace(v), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			continue
		}
		if ac, err := s.Issuer.Parse(strings.TrimSpace(tok)); err == nil && strings.EqualFold(ac.TenantID, creds.TenantID) {
			return nil
		}
	}
	return &AuthError{http.StatusForbidden, "LinkedAuthorizationFailed",
		"Subscription '" + sub + "' is in tenant '" + want + "': its resources are linked to resources of tenant '" + creds.TenantID +
			"', so the request needs a valid token of tenant '" + creds.TenantID + "' in the " + HeaderAuxiliary + " header."}
}

// subscriptionOf returns the subscription of an ARM path (/subscriptions/<id>/...).
func subscriptionOf(path string) (string, bool) {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if len(parts) < 2 || !strings.EqualFold(parts[0], "subscriptions") || parts[1] == "" {
		return "", false
	}
	return parts[1], true
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
	c, err := i.Parse(strings.TrimSpace(token))
	switch {
	case err == nil:
		return c, nil
	case errors.Is(err, ErrExpiredToken):
		return nil, &AuthError{http.StatusUnauthorized, "ExpiredAuthenticationToken", "The access token expiry UTC time is earlier than current UTC time."}
	case errors.Is(err, ErrBadAudience):
		return nil, &AuthError{http.StatusUnauthorized, "InvalidAuthenticationToken", "The access token has been obtained for wrong audience or resource."}
	default:
		return nil, &AuthError{http.StatusUnauthorized, "InvalidAuthenticationToken", "The access token is invalid."}
	}
}
