package config

import (
	"fmt"
	"net/url"
	"strings"
)

// CheckHTTPSURL accepts an absolute https:// URL with a host and without user information.
// Endpoints that receive credentials (ARM, the login server) or name them (the metadata
// document) are only trusted over TLS, so plain http:// is refused, unlike the existing provider.
func CheckHTTPSURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%s is not a URL", Quote(raw))
	}
	switch {
	case !strings.EqualFold(u.Scheme, "https"):
		return fmt.Errorf("%s must be an https:// URL (credentials are only sent over TLS)", Quote(raw))
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("%s has no host", Quote(raw))
	case u.User != nil:
		return fmt.Errorf("%s must not carry user information", Quote(redactUserinfo(u)))
	}
	return nil
}

func redactUserinfo(u *url.URL) string {
	c := *u
	c.User = url.User("REDACTED")
	return c.String()
}
