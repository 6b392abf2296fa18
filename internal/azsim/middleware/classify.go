// Package middleware wraps azsim's ARM engine with what ARM's front door adds: authentication,
// request classification and counters, a latency model, ARM's subscription throttling, and
// injected faults.
package middleware

import (
	"net/http"
	"strings"
)

// Class is an operation class, as ARM throttles and as the latency model and faults select.
type Class string

// Operation classes.
const (
	Read   Class = "read"
	Write  Class = "write"
	Delete Class = "delete"
	Action Class = "action"
)

// Op is a classified ARM request.
type Op struct {
	Method string
	Class  Class
	// ResourceType is the full type the request addresses, e.g. "Microsoft.Network/loadBalancers"
	// or "Microsoft.Network/loadBalancers/backendAddressPools"; resource groups are
	// "Microsoft.Resources/resourceGroups". LRO status URLs are
	// "<namespace>/locations/operations" (or operationResults).
	ResourceType string
	// Action is the POST action name ("start", "deallocate", …), if any.
	Action string
	// Subscription is "" for requests outside /subscriptions/{id}.
	Subscription string
	// List is true for collection GETs.
	List bool
}

// Classify derives an Op from the method and URL path alone.
func Classify(r *http.Request) Op {
	op := Op{Method: r.Method, Class: classOf(r.Method)}
	seg := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(seg) == 0 || !strings.EqualFold(seg[0], "subscriptions") {
		return op
	}
	if len(seg) == 1 {
		op.ResourceType, op.List = "Microsoft.Resources/subscriptions", true
		return op
	}
	op.Subscription = seg[1]
	rest := seg[2:]
	if len(rest) == 0 {
		op.ResourceType = "Microsoft.Resources/subscriptions"
		return op
	}
	if strings.EqualFold(rest[0], "resourceGroups") {
		switch {
		case len(rest) == 1:
			op.ResourceType, op.List = "Microsoft.Resources/resourceGroups", true
			return op
		case len(rest) == 2:
			op.ResourceType = "Microsoft.Resources/resourceGroups"
			return op
		case len(rest) >= 3 && strings.EqualFold(rest[2], "providers"):
			rest = rest[2:]
		default:
			// e.g. /resourceGroups/{rg}/resources
			op.ResourceType = "Microsoft.Resources/" + rest[2]
			op.List = len(rest) == 3
			return op
		}
	}
	if !strings.EqualFold(rest[0], "providers") {
		// /subscriptions/{s}/operationresults/{id} and friends.
		op.ResourceType = "Microsoft.Resources/" + rest[0]
		op.List = len(rest) == 1
		return op
	}
	if len(rest) == 1 {
		op.ResourceType, op.List = "Microsoft.Resources/providers", true
		return op
	}
	ns := rest[1]
	pairs := rest[2:]
	if len(pairs) == 0 {
		op.ResourceType = "Microsoft.Resources/providers"
		return op
	}
	types := []string{ns}
	for i := 0; i < len(pairs); i += 2 {
		types = append(types, pairs[i])
	}
	if len(pairs)%2 == 1 {
		// An odd tail is a collection (GET) or an action on the resource before it (POST).
		if r.Method == http.MethodPost && len(pairs) > 1 {
			op.Action = types[len(types)-1]
			types = types[:len(types)-1]
		} else {
			op.List = true
		}
	}
	op.ResourceType = strings.Join(types, "/")
	return op
}

func classOf(method string) Class {
	switch method {
	case http.MethodGet, http.MethodHead:
		return Read
	case http.MethodPut, http.MethodPatch:
		return Write
	case http.MethodDelete:
		return Delete
	default:
		return Action
	}
}

// bucketOf is the throttling bucket of a class: ARM counts actions (POST) as writes.
func bucketOf(c Class) Class {
	if c == Action {
		return Write
	}
	return c
}

// typeMatches compares a selector with a resource type: equal ignoring case, or the selector is
// the last segments ("loadBalancers" matches "Microsoft.Network/loadBalancers").
func typeMatches(selector, resourceType string) bool {
	if selector == "" {
		return true
	}
	s, t := strings.ToLower(selector), strings.ToLower(resourceType)
	return s == t || strings.HasSuffix(t, "/"+s)
}
