package arm

import (
	"errors"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
)

// StatusCode returns the HTTP status of an ARM error (0 if err is not one).
func StatusCode(err error) int {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}

// IsNotFound reports an ARM 404.
func IsNotFound(err error) bool { return StatusCode(err) == http.StatusNotFound }

// IsPreconditionFailed reports an ARM 412 (ETag mismatch).
func IsPreconditionFailed(err error) bool { return StatusCode(err) == http.StatusPreconditionFailed }
