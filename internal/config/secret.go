package config

import (
	"encoding/json"
	"log/slog"
)

// Secret is a string that never prints: fmt, JSON, klog and slog all see "REDACTED". Use Value
// to read it. Unmarshalling is plain, so azure.json is read as usual.
type Secret string

const redacted = "REDACTED"

// MinSecretLength is the shortest client secret or certificate password that Validate accepts
// for the login in use. Logs and error messages are scrubbed of credentials by replacing every
// occurrence, which for a string of one to three characters would destroy ordinary text, so
// such a credential is refused rather than left unscrubbed.
const MinSecretLength = 4

// Value returns the secret itself, for the one place that needs it (the credential).
func (s Secret) Value() string { return string(s) }

// String redacts a non-empty secret.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString keeps %#v from printing the secret.
func (s Secret) GoString() string { return `"` + s.String() + `"` }

// MarshalJSON redacts a non-empty secret.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// LogValue redacts for slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// String renders the configuration as JSON with every secret redacted.
func (c *Config) String() string {
	b, err := json.Marshal(c)
	if err != nil {
		return "<unprintable config: " + err.Error() + ">"
	}
	return string(b)
}

// LogValue renders the configuration for slog with secrets redacted.
func (c *Config) LogValue() slog.Value { return slog.StringValue(c.String()) }

// MarshalLog renders the configuration for logr/klog with secrets redacted.
func (c *Config) MarshalLog() any { return c.String() }
