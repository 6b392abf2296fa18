package network

import (
	"encoding/json"
	"net/http"
	"regexp"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// Service gateway state that has no place in the SDK's properties model is
// kept under private document keys (never sent to clients).
const (
	sgLocationsKey = arm.PrivatePrefix + "AddressLocations"
)

func serviceGatewaySpec(e *arm.Engine) arm.TypeSpec {
	return arm.TypeSpec{
		Type: ns + "serviceGateways", APIVersions: arm.ServiceGatewayAPIVersions,
		NamePattern: sgNamePattern,
		Prepare:     prepareServiceGateway,
		Actions: map[string]arm.Action{
			"updateaddresslocations": {Handle: sgAction(e, updateAddressLocations)},
			"updateservices":         {Handle: sgAction(e, updateServices)},
			"addresslocations":       {Methods: []string{http.MethodGet}, Handle: listPrivate(sgLocationsKey)},
			"services":               {Methods: []string{http.MethodGet}, Handle: listServices},
		},
	}
}

func prepareServiceGateway(tx *arm.Tx, w *arm.Write) error {
	var old map[string]any
	if w.Old != nil {
		old = w.Old
	}
	if err := normalize(w, &armnetwork.ServiceGateway{}); err != nil {
		return err
	}
	// Unlike most NRP resources, a service gateway has no resourceGuid.
	d, p := w.Doc, arm.Props(w.Doc)
	delete(p, "resourceGuid")
	if arm.Obj(d, false, "sku") == nil {
		d["sku"] = map[string]any{"name": "Standard", "tier": "Regional"}
	}
	if vn := refID(p, "virtualNetwork"); vn != "" && !tx.Exists(vn) {
		return arm.InvalidReference(vn, w.ID.String())
	}
	for _, k := range []string{"routeTargetAddress", "routeTargetAddressV6"} {
		rt := arm.Obj(p, false, k)
		if rt == nil {
			continue
		}
		sn := refID(rt, "subnet")
		if sn == "" {
			continue
		}
		want := ""
		if strings.EqualFold(arm.Str(rt, "privateIPAllocationMethod"), "Static") {
			want = arm.Str(rt, "privateIPAddress")
		}
		ip, err := AllocatePrivateIP(tx, sn, w.ID.String()+"/"+k, want)
		if err != nil {
			return err
		}
		rt["privateIPAddress"] = ip
	}
	// NRP shows the services inline (properties.services, not in the SDK
	// model); address locations are only served by their own GET.
	d[sgLocationsKey], p["services"] = []any{}, []any{}
	if old != nil {
		if v, ok := old[sgLocationsKey]; ok {
			d[sgLocationsKey] = v
		}
		if v, ok := arm.Obj(old, false, "properties")["services"]; ok {
			p["services"] = v
		}
	}
	return nil
}

// sgAction wraps an update action: decode, apply to the document through
// tx.Update (etag renewed on change), answer with NRP's synchronous 200 (or
// 202 + polling headers when configured swagger-faithful).
func sgAction(e *arm.Engine, apply func(tx *arm.Tx, id arm.ResourceID, doc, body map[string]any) error) func(*arm.Tx, arm.ResourceID, *arm.ActionRequest) (int, any, error) {
	return func(tx *arm.Tx, id arm.ResourceID, r *arm.ActionRequest) (int, any, error) {
		if r.Body == nil {
			return 0, nil, arm.BadRequest("InvalidRequestContent", "The request content was invalid and could not be deserialized: the body is empty.")
		}
		if err := tx.Update(id.String(), func(doc map[string]any) error { return apply(tx, id, doc, r.Body) }); err != nil {
			return 0, nil, err
		}
		async, loc := r.AsyncOperation()
		r.Header.Set("Azure-AsyncOperation", async)
		r.Header.Set("Location", loc)
		status := e.Config().ServiceGatewayActionStatus
		return status, nil, nil
	}
}

func listPrivate(key string) func(*arm.Tx, arm.ResourceID, *arm.ActionRequest) (int, any, error) {
	return func(tx *arm.Tx, id arm.ResourceID, r *arm.ActionRequest) (int, any, error) {
		doc, _ := tx.Get(id.String())
		v, _ := doc[key].([]any)
		if v == nil {
			v = []any{}
		}
		return http.StatusOK, map[string]any{"value": v}, nil
	}
}

func listServices(tx *arm.Tx, id arm.ResourceID, r *arm.ActionRequest) (int, any, error) {
	doc, _ := tx.Get(id.String())
	v, _ := arm.Obj(doc, false, "properties")["services"].([]any)
	if v == nil {
		v = []any{}
	}
	return http.StatusOK, map[string]any{"value": v}, nil
}

func updateAddressLocations(tx *arm.Tx, id arm.ResourceID, doc, body map[string]any) error {
	var req armnetwork.ServiceGatewayUpdateAddressLocationsRequest
	if err := arm.ToModel(body, &req); err != nil {
		return arm.BadRequest("InvalidRequestFormat", "Cannot parse the request: %v", err)
	}
	full := req.Action != nil && strings.EqualFold(string(*req.Action), "FullUpdate")
	seen := map[string]bool{}
	for _, l := range req.AddressLocations {
		if l == nil || l.AddressLocation == nil || *l.AddressLocation == "" {
			return arm.BadRequest("InvalidRequestFormat", "Every address location needs an addressLocation.")
		}
		k := strings.ToLower(*l.AddressLocation)
		if seen[k] {
			return arm.BadRequest("DuplicateLocationsInRequest", "Address location %s appears more than once in the request.", *l.AddressLocation)
		}
		seen[k] = true
	}
	current := map[string]map[string][]string{} // location → address → services
	if !full {
		var locs []*armnetwork.ServiceGatewayAddressLocation
		_ = remarshal(doc[sgLocationsKey], &locs)
		for _, l := range locs {
			m := map[string][]string{}
			for _, a := range l.Addresses {
				m[deref(a.Address)] = derefAll(a.Services)
			}
			current[deref(l.AddressLocation)] = m
		}
	}
	for _, l := range req.AddressLocations {
		loc := *l.AddressLocation
		if !full && len(l.Addresses) == 0 {
			delete(current, loc) // location-level partial update without addresses deletes it
			continue
		}
		addrFull := full || l.AddressUpdateAction == nil || strings.EqualFold(string(*l.AddressUpdateAction), "FullUpdate")
		m := current[loc]
		if m == nil || addrFull {
			m = map[string][]string{}
		}
		for _, a := range l.Addresses {
			if a == nil || deref(a.Address) == "" {
				return arm.BadRequest("InvalidRequestFormat", "Every address in location %s needs an address.", loc)
			}
			svcs := derefAll(a.Services)
			if !addrFull && len(svcs) == 0 {
				delete(m, *a.Address)
				continue
			}
			m[*a.Address] = svcs
		}
		current[loc] = m
	}
	var locs []any
	for _, loc := range sortedKeys(current) {
		var addrs []any
		for _, a := range sortedKeys(current[loc]) {
			svcs := make([]any, 0, len(current[loc][a]))
			for _, s := range current[loc][a] {
				svcs = append(svcs, s)
			}
			addrs = append(addrs, map[string]any{"address": a, "services": svcs})
		}
		if addrs == nil {
			addrs = []any{}
		}
		locs = append(locs, map[string]any{"addressLocation": loc, "addresses": addrs})
	}
	if locs == nil {
		locs = []any{}
	}
	doc[sgLocationsKey] = locs
	return nil
}

func updateServices(tx *arm.Tx, id arm.ResourceID, doc, body map[string]any) error {
	var req armnetwork.ServiceGatewayUpdateServicesRequest
	if err := arm.ToModel(body, &req); err != nil {
		return arm.BadRequest("InvalidRequestFormat", "Cannot parse the request: %v", err)
	}
	full := req.Action != nil && strings.EqualFold(string(*req.Action), "FullUpdate")
	current := map[string]any{}
	if !full {
		raw, _ := arm.Props(doc)["services"].([]any)
		for _, s := range raw {
			if m, ok := s.(map[string]any); ok {
				current[arm.Str(m, "name")] = m
			}
		}
	}
	seen := map[string]bool{}
	for _, sr := range req.ServiceRequests {
		if sr == nil || sr.Service == nil || deref(sr.Service.Name) == "" {
			return arm.BadRequest("InvalidRequestFormat", "Every service request needs a service with a name.")
		}
		name := *sr.Service.Name
		if seen[strings.ToLower(name)] {
			return arm.BadRequest("DuplicateServicesInRequest", "Service %s appears more than once in the request.", name)
		}
		seen[strings.ToLower(name)] = true
		if sr.IsDelete != nil && *sr.IsDelete {
			// NRP refuses to drop a service that addresses still map to (callers withdraw the
			// addresses first). A full update is checked the same way for what it drops.
			if loc, addr, ok := addressOf(doc, name); ok {
				return overlayMapped(name, loc, addr)
			}
			delete(current, name)
			continue
		}
		if pr := sr.Service.Properties; pr != nil {
			for _, pool := range pr.LoadBalancerBackendPools {
				if pool != nil && pool.ID != nil && !tx.Exists(*pool.ID) {
					return arm.InvalidReference(*pool.ID, id.String()+"/services/"+name)
				}
			}
			if pr.PublicNatGatewayID != nil && *pr.PublicNatGatewayID != "" && !tx.Exists(*pr.PublicNatGatewayID) {
				return arm.InvalidReference(*pr.PublicNatGatewayID, id.String()+"/services/"+name)
			}
		}
		m, err := arm.FromModel(sr.Service)
		if err != nil {
			return err
		}
		current[name] = m
	}
	if full {
		raw, _ := arm.Props(doc)["services"].([]any)
		for _, s := range raw {
			m, _ := s.(map[string]any)
			name := arm.Str(m, "name")
			if _, kept := current[name]; kept {
				continue
			}
			if loc, addr, ok := addressOf(doc, name); ok {
				return overlayMapped(name, loc, addr)
			}
		}
	}
	out := []any{}
	for _, k := range sortedKeys(current) {
		out = append(out, current[k])
	}
	arm.Props(doc)["services"] = out
	return nil
}

// addressOf finds an address location entry that names the service.
func addressOf(doc map[string]any, service string) (loc, addr string, ok bool) {
	var locs []*armnetwork.ServiceGatewayAddressLocation
	_ = remarshal(doc[sgLocationsKey], &locs)
	for _, l := range locs {
		for _, a := range l.Addresses {
			for _, s := range a.Services {
				if s != nil && strings.EqualFold(*s, service) {
					return deref(l.AddressLocation), deref(a.Address), true
				}
			}
		}
	}
	return "", "", false
}

func overlayMapped(service, loc, addr string) error {
	return arm.BadRequest("ServiceWithOverlayMappingsCannotBeDeleted",
		"Service %s cannot be deleted: address %s in location %s is still mapped to it. Remove its addresses first.", service, addr, loc)
}

func remarshal(v any, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

var sgNamePattern = regexp.MustCompile(`^[a-zA-Z0-9-]+$`)

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func derefAll(ss []*string) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		if s != nil {
			out = append(out, *s)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
