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
	h := r.Header.Get("Authorization")
	if h == "" {
		return &AuthError{http.StatusUnauthorized, "AuthenticationFailed", "Authentication failed. The 'Authorization' header is missing."}
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return &AuthError{http.StatusUnauthorized, "AuthenticationFailed", "Authentication failed. The 'Authorization' header is provided in an invalid format."}
	}
	_, err := i.Parse(strings.TrimSpace(token))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrExpiredToken):
		return &AuthError{http.StatusUnauthorized, "ExpiredAuthenticationToken", "The access token expiry UTC time is earlier than current UTC time."}
	case errors.Is(err, ErrBadAudience):
		return &AuthError{http.StatusUnauthorized, "InvalidAuthenticationToken", "The access token has been obtained for wrong audience or resource."}
	default:
		return &AuthError{http.StatusUnauthorized, "InvalidAuthenticationToken", "The access token is invalid."}
	}
}
