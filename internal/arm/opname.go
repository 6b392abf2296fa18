package arm

import "strings"

// Operation describes one ARM request for metrics and logs.
type Operation struct {
	// Verb is get, list, put, patch, delete or post.
	Verb string
	// Namespace is the resource provider, e.g. Microsoft.Network ("" for subscription-level paths).
	Namespace string
	// ResourceType is the type path without names, e.g. virtualMachineScaleSets/virtualMachines.
	ResourceType string
}

// ParseOperation classifies an ARM request path.
func ParseOperation(method, path string) Operation {
	segs := splitPath(path)
	op := Operation{}
	provIdx := -1
	for i := len(segs) - 2; i >= 0; i-- {
		if strings.EqualFold(segs[i], "providers") {
			provIdx = i
			break
		}
	}
	var rest []string
	if provIdx >= 0 {
		op.Namespace = segs[provIdx+1]
		rest = segs[provIdx+2:]
	} else {
		// /subscriptions/{s}/resourceGroups/{rg}...: type/name pairs after the subscription.
		rest = segs
		if len(rest) >= 2 && strings.EqualFold(rest[0], "subscriptions") {
			rest = rest[2:]
		}
	}
	var types []string
	for i := 0; i < len(rest); i += 2 {
		types = append(types, rest[i])
	}
	switch {
	case provIdx >= 0 && len(rest) == 0:
		op.ResourceType = "providers"
	default:
		op.ResourceType = strings.Join(types, "/")
	}
	collection := len(rest)%2 == 1
	switch strings.ToUpper(method) {
	case "GET", "HEAD":
		op.Verb = "get"
		if collection {
			op.Verb = "list"
		}
	case "PUT":
		op.Verb = "put"
	case "PATCH":
		op.Verb = "patch"
	case "DELETE":
		op.Verb = "delete"
	default:
		op.Verb = "post"
	}
	return op
}

func splitPath(p string) []string {
	var out []string
	for _, s := range strings.Split(p, "/") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
