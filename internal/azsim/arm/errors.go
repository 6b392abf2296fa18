package arm

import (
	"fmt"
	"net/http"
)

// Error is an ARM error response: an HTTP status plus the body
// {"error":{"code","message","target"?,"details"?}}. Handlers return *Error to
// have the engine render it; any other error becomes a 500.
type Error struct {
	Status  int           `json:"-"`
	Code    string        `json:"code"`
	Message string        `json:"message"`
	Target  string        `json:"target,omitempty"`
	Details []ErrorDetail `json:"details,omitempty"`
}

// ErrorDetail is one entry of error.details.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Target  string `json:"target,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// Errorf builds an ARM error.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// BadRequest is a 400 with the given code.
func BadRequest(code, format string, args ...any) *Error {
	return Errorf(http.StatusBadRequest, code, format, args...)
}

// errorBody is the JSON envelope.
type errorBody struct {
	Error *Error `json:"error"`
}

// NotFoundTopLevel is ARM's 404 for a missing top-level resource.
func NotFoundTopLevel(id ResourceID) *Error {
	if id.Namespace == ResourceGroupsNamespace {
		return Errorf(http.StatusNotFound, "ResourceGroupNotFound", "Resource group '%s' could not be found.", id.Name())
	}
	return Errorf(http.StatusNotFound, "ResourceNotFound",
		"The Resource '%s/%s/%s' under resource group '%s' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix",
		id.Namespace, id.Types[0], id.Names[0], id.ResourceGroup)
}

// NotFoundChild is NRP's 404 for a missing child resource.
func NotFoundChild(canonicalID string) *Error {
	return Errorf(http.StatusNotFound, "NotFound", "Resource %s not found.", canonicalID)
}

// ResourceGroupNotFound is the 404 for writes under a missing resource group.
func ResourceGroupNotFound(rg string) *Error {
	return Errorf(http.StatusNotFound, "ResourceGroupNotFound", "Resource group '%s' could not be found.", rg)
}

// InvalidReference is NRP's error for a reference to a resource that does not exist.
func InvalidReference(refID, referrer string) *Error {
	return BadRequest("InvalidResourceReference",
		"Resource %s referenced by resource %s was not found. Please make sure that the referenced resource exists, and that both resources are in the same region.",
		refID, referrer)
}

// InvalidResourceName is ARM's answer to a name that breaks NRP's naming rule.
func InvalidResourceName(name string) *Error {
	return BadRequest("InvalidResourceName",
		"Resource name %s is invalid. The name can be up to 80 characters long. It must begin with a word character, and it must end with a word character or with '_'. The name may contain word characters or '.', '-', '_'.", name)
}
