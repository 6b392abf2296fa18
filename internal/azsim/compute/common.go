package compute

import (
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"sort"
	"strings"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

var instanceIDPattern = regexp.MustCompile(`^[0-9]+$`)

// decode converts a stored or request document into an SDK model; a shape the
// model cannot hold is the client's fault (400).
func decode(doc map[string]any, out any) error {
	if err := arm.ToModel(doc, out); err != nil {
		return arm.BadRequest("InvalidRequestFormat", "Cannot parse the request: %v", err)
	}
	return nil
}

// encode converts an SDK model back into a document.
func encode(v any) (map[string]any, error) {
	doc, err := arm.FromModel(v)
	if err != nil {
		return nil, arm.Errorf(http.StatusInternalServerError, "InternalServerError", "%v", err)
	}
	return doc, nil
}

func invalidParameter(target, format string, args ...any) *arm.Error {
	e := arm.BadRequest("InvalidParameter", format, args...)
	e.Target = target
	return e
}

// checkZones validates requested zones against the configured location. An
// unknown location accepts any zones, so seeding other regions keeps working.
func (h *handler) checkZones(location string, zones []*string, name string) error {
	loc, ok := FindLocation(h.cfg.Locations, location)
	if !ok || len(zones) == 0 {
		return nil
	}
	for _, z := range zones {
		if z == nil || !contains(loc.Zones, *z) {
			zs := "(none)"
			if len(loc.Zones) > 0 {
				zs = strings.Join(loc.Zones, ",")
			}
			return invalidParameter("zones", "The zone(s) '%s' for resource '%s' is not supported. The supported zones for location '%s' are '%s'",
				str(z), name, loc.Name, zs)
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// requireRefs checks that every referenced resource or child exists.
func requireRefs(tx *arm.Tx, referrer string, ids ...string) error {
	for _, id := range ids {
		if id != "" && !tx.Exists(id) {
			return arm.InvalidReference(id, referrer)
		}
	}
	return nil
}

// checkScaleSetNetwork validates subnets and pools referenced by scale set
// network interface configurations.
func checkScaleSetNetwork(tx *arm.Tx, referrer string, refs []IPConfigRef) error {
	for _, r := range refs {
		if err := requireRefs(tx, referrer, r.SubnetID); err != nil {
			return err
		}
		if err := requireRefs(tx, referrer, r.Pools...); err != nil {
			return err
		}
	}
	return nil
}

func writeJSONBody(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"InternalServerError","message":"response encoding failed"}}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeARMError(w http.ResponseWriter, err error) {
	var ae *arm.Error
	if !errors.As(err, &ae) {
		ae = arm.Errorf(http.StatusInternalServerError, "InternalServerError", "%v", err)
	}
	status := ae.Status
	if status == 0 {
		status = http.StatusInternalServerError
	}
	writeJSONBody(w, status, map[string]any{"error": ae})
}

// sameIDs compares two ID lists as sets, case-insensitively.
func sameIDs(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	na, nb := normIDs(a), normIDs(b)
	for i := range na {
		if na[i] != nb[i] {
			return false
		}
	}
	return true
}

func normIDs(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strings.ToLower(id)
	}
	sort.Strings(out)
	return out
}

// markRuntime changes runtime-only state of a stored document (power state in
// the instance view) without renewing its etag: Azure does not treat a power
// operation as a model change, and bumping the etag would make the CCM's
// next If-Match write fail for no reason.
func markRuntime(tx *arm.Tx, id string, fn func(doc map[string]any)) bool {
	doc, ok := tx.Get(id)
	if !ok {
		return false
	}
	fn(doc)
	tx.MarkChanged(id)
	return true
}

// sameModel reports whether two stored documents hold the same model: equal once the etag,
// the provisioning state and the given top-level keys are left out. CRP keeps an etag across a
// write that changes nothing else (see arm.TypeSpec.KeepETag).
func sameModel(old, doc map[string]any, ignore ...string) bool {
	clean := func(d map[string]any) []byte {
		c := arm.CopyDoc(d)
		delete(c, "etag")
		for _, k := range ignore {
			delete(c, k)
		}
		if p, ok := c["properties"].(map[string]any); ok {
			delete(p, "provisioningState")
		}
		b, err := json.Marshal(c)
		if err != nil {
			return nil
		}
		return b
	}
	a, b := clean(old), clean(doc)
	return a != nil && b != nil && string(a) == string(b)
}
