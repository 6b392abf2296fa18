package deploy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path"
	"strings"
)

// Role is an Azure custom role definition (the JSON `az role definition create` takes).
type Role struct {
	Name             string   `json:"Name"`
	IsCustom         bool     `json:"IsCustom"`
	Description      string   `json:"Description"`
	Actions          []string `json:"Actions"`
	NotActions       []string `json:"NotActions"`
	DataActions      []string `json:"DataActions"`
	NotDataActions   []string `json:"NotDataActions"`
	AssignableScopes []string `json:"AssignableScopes"`
}

// LoadRole reads a role definition file.
func LoadRole(file string) (Role, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return Role{}, err
	}
	var r Role
	if err := json.Unmarshal(b, &r); err != nil {
		return Role{}, fmt.Errorf("%s: %w", file, err)
	}
	if r.Name == "" || len(r.Actions) == 0 || len(r.AssignableScopes) == 0 {
		return Role{}, fmt.Errorf("%s: Name, Actions and AssignableScopes are required", file)
	}
	return r, nil
}

// Allows reports whether the role grants action: an Actions pattern matches it (ARM's "*"
// wildcards, case-insensitive) and no NotActions pattern does.
func (r Role) Allows(action string) bool {
	match := func(patterns []string) bool {
		for _, p := range patterns {
			if ok, _ := path.Match(strings.ToLower(p), strings.ToLower(action)); ok {
				return true
			}
		}
		return false
	}
	return match(r.Actions) && !match(r.NotActions)
}

// ActionFor is the role action ARM checks for a request, from its method and resource type
// (e.g. "Microsoft.Network/loadBalancers/backendAddressPools"): read for GET (one resource or
// a list), write for PUT and PATCH, delete for DELETE. needed is false for requests that are
// not authorised against the caller's role: polls of long-running operations and calls
// outside the subscription (login, metadata). POST actions cannot be named from the type
// alone and are an error.
func ActionFor(method, resourceType string) (action string, needed bool, err error) {
	t := resourceType
	if t == "" || !strings.Contains(t, "/") {
		return "", false, nil
	}
	last := strings.ToLower(t[strings.LastIndex(t, "/")+1:])
	// Polls of long-running operations (…/operations, …/asyncoperations, Compute's
	// …/DiskOperations, …/operationResults, …/operationStatuses) are not authorised against
	// the caller's role.
	if strings.HasSuffix(last, "operations") || last == "operationresults" || last == "operationstatuses" {
		return "", false, nil
	}
	if strings.EqualFold(t, "Microsoft.Resources/providers") {
		t = "Microsoft.Resources/subscriptions/providers"
	}
	switch method {
	case http.MethodGet, http.MethodHead:
		return t + "/read", true, nil
	case http.MethodPut, http.MethodPatch:
		return t + "/write", true, nil
	case http.MethodDelete:
		return t + "/delete", true, nil
	}
	return "", true, fmt.Errorf("%s on %s: the action of a %s cannot be derived from the resource type", method, resourceType, method)
}
