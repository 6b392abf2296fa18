package config

import "errors"

// InvalidError is a configuration mistake found while starting (a missing certificate file, an
// endpoint that is not https, a metadata document without the configured cloud): retrying
// cannot heal it, so the CCM stops with the key named instead of retrying forever.
type InvalidError struct{ Err error }

func (e *InvalidError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *InvalidError) Unwrap() error { return e.Err }

// Invalid marks err as a configuration mistake (nil stays nil).
func Invalid(err error) error {
	if err == nil {
		return nil
	}
	return &InvalidError{Err: err}
}

// IsInvalid reports whether err is (or wraps) a configuration mistake.
func IsInvalid(err error) bool {
	var ie *InvalidError
	return errors.As(err, &ie)
}
