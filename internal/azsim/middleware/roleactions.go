package middleware

import (
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strings"
)

// RoleAction is the Azure RBAC action ARM checks against the caller's role for a request: read
// for GET (one resource or a list), write for PUT and PATCH, delete for DELETE,
// <type>/<action>/action for POST. "" for requests ARM does not authorise against the caller's
// role in this model: status polls of long-running operations, anything outside a subscription.
func (op Op) RoleAction() string {
	t := op.ResourceType
	if op.Subscription == "" || t == "" || !strings.Contains(t, "/") {
		return ""
	}
	// Polls of long-running operations (…/operations, …/asyncoperations, Compute's
	// …/DiskOperations, …/operationResults, …/operationStatuses) are not authorised against the
	// caller's role.
	last := strings.ToLower(t[strings.LastIndex(t, "/")+1:])
	if strings.HasSuffix(last, "operations") || last == "operationresults" || last == "operationstatuses" {
		return ""
	}
	switch strings.ToLower(t) {
	case "microsoft.resources/providers":
		t = "Microsoft.Resources/subscriptions/providers"
	case "microsoft.resources/resourcegroups":
		t = "Microsoft.Resources/subscriptions/resourceGroups"
	}
	switch op.Class {
	case Read:
		return t + "/read"
	case Write:
		return t + "/write"
	case Delete:
		return t + "/delete"
	}
	if op.Action == "" {
		return ""
	}
	return t + "/" + op.Action + "/action"
}

// readOnlyRefs are keys whose references a client may send back from a GET but ARM ignores
// (back-references it maintains itself): they need no access to the referenced resource.
var readOnlyRefs = map[string]bool{
	"backendipconfigurations": true, "networkinterfaceipconfiguration": true, "ipconfiguration": true,
	"ipconfigurations": true, "networkinterfaces": true, "virtualmachine": true, "subnets": true,
	"linkedpublicipaddress": true, "servicepublicipaddress": true, "privateendpoint": true,
	"loadbalancingrules": true, "inboundnatrules": true, "outboundrules": true, "inboundnatpools": true,
	// A public IP's NAT gateway is read-only (a subnet's is not, but nothing here writes subnets).
	"natgateway": true,
}

// LinkedActions are the join actions ARM's linked access check requires for a write: every
// resource the written document references outside itself must allow the caller to join it —
// Microsoft.Network/publicIPAddresses/join/action for a frontend's public IP,
// …/virtualNetworks/subnets/join/action for a NIC's or internal frontend's subnet,
// …/loadBalancers/backendAddressPools/join/action for a NIC or scale set joining a pool,
// …/virtualNetworks/joinLoadBalancer/action for IP-based pool addresses in a VNet. Read-only
// back-references (readOnlyRefs) and references to the written resource's own children are not
// checked, as in ARM.
func LinkedActions(op Op, path string, body []byte) []string {
	if op.Class != Write || len(body) == 0 {
		return nil
	}
	var doc any
	if json.Unmarshal(body, &doc) != nil {
		return nil
	}
	self := strings.ToLower(topLevelID(path))
	seen := map[string]bool{}
	var walk func(v any, key string)
	walk = func(v any, key string) {
		switch t := v.(type) {
		case map[string]any:
			if id, ok := t["id"].(string); ok && key != "" && !readOnlyRefs[strings.ToLower(key)] {
				if a := joinAction(id, key, self); a != "" {
					seen[a] = true
				}
			}
			for k, c := range t {
				if k != "id" {
					walk(c, k)
				}
			}
		case []any:
			for _, c := range t {
				walk(c, key)
			}
		}
	}
	walk(doc, "")
	out := make([]string, 0, len(seen))
	for a := range seen {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// joinAction is the action needed to reference id under key from the resource self.
func joinAction(id, key, self string) string {
	top := strings.ToLower(topLevelID(id))
	if top == "" || top == self {
		return ""
	}
	op := Classify(&http.Request{Method: http.MethodGet, URL: mustPath(id)})
	if op.ResourceType == "" || op.List {
		return ""
	}
	if strings.EqualFold(op.ResourceType, "Microsoft.Network/virtualNetworks") && strings.EqualFold(key, "virtualNetwork") {
		// IP-based backend pool addresses name their VNet.
		return "Microsoft.Network/virtualNetworks/joinLoadBalancer/action"
	}
	return op.ResourceType + "/join/action"
}

func mustPath(id string) *url.URL { return &url.URL{Path: id} }

// topLevelID is /subscriptions/…/providers/<ns>/<type>/<name> of an ID or path ("" if none).
func topLevelID(id string) string {
	seg := strings.Split(strings.Trim(id, "/"), "/")
	for i := 0; i+3 < len(seg); i++ {
		if strings.EqualFold(seg[i], "providers") {
			return "/" + strings.Join(seg[:i+4], "/")
		}
	}
	return ""
}

// clientOf names the program behind a request from its User-Agent: the first product token
// without version ("azure-ccm" for "azure-ccm azsdk-go-armnetwork/v9.0.0 (go1.26; linux)").
func clientOf(r *http.Request) string {
	ua := strings.TrimSpace(r.Header.Get("User-Agent"))
	if ua == "" {
		return "unknown"
	}
	first, _, _ := strings.Cut(ua, " ")
	name, _, _ := strings.Cut(first, "/")
	if name == "" {
		return "unknown"
	}
	return name
}

// RoleActionCount is how often a client needed one role action.
type RoleActionCount struct {
	Client string `json:"client"`
	Action string `json:"action"`
	// Linked is true for join actions required by references in a write (LinkedActions).
	Linked bool  `json:"linked,omitempty"`
	Count  int64 `json:"count"`
}
