package network

import (
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// normalize round-trips a document through its SDK model: wrong JSON types
// become 400 InvalidRequestFormat, unknown fields are dropped (as ARM does),
// and the stored shape is exactly the SDK's.
func normalize(w *arm.Write, model any) error {
	// NRP refuses a null element in any list of the request (e.g.
	// "frontendIPConfigurations": [null]); the SDK models would silently drop it.
	if path := nullElement(w.Doc, ""); path != "" {
		return arm.BadRequest("InvalidRequestFormat", "Cannot parse the request: %s is null.", path)
	}
	if err := arm.ToModel(w.Doc, model); err != nil {
		return arm.BadRequest("InvalidRequestFormat", "Cannot parse the request: %v", err)
	}
	doc, err := arm.FromModel(model)
	if err != nil {
		return arm.Errorf(http.StatusInternalServerError, "InternalServerError", "%v", err)
	}
	w.Doc = doc
	return nil
}

// nullElement returns the path of the first null element of a list inside v ("" if none).
func nullElement(v any, path string) string {
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if found := nullElement(t[k], p); found != "" {
				return found
			}
		}
	case []any:
		for i, e := range t {
			p := fmt.Sprintf("%s[%d]", path, i)
			if e == nil {
				return p
			}
			if found := nullElement(e, p); found != "" {
				return found
			}
		}
	}
	return ""
}

func equalFoldLoc(a, b string) bool {
	n := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, " ", "")) }
	return n(a) == n(b)
}

// keepResourceGUID carries resourceGuid over from the old document or creates one.
func keepResourceGUID(w *arm.Write) {
	p := arm.Props(w.Doc)
	if w.Old != nil {
		if g := arm.Str(w.Old, "properties", "resourceGuid"); g != "" {
			p["resourceGuid"] = g
			return
		}
	}
	p["resourceGuid"] = arm.NewGUID()
}

// requireRef checks that a referenced resource (top-level or child) exists.
func requireRef(tx *arm.Tx, ref, referrer string) error {
	if ref == "" {
		return nil
	}
	if !tx.Exists(ref) {
		return arm.InvalidReference(ref, referrer)
	}
	return nil
}

// refID returns doc[path...].id.
func refID(doc map[string]any, path ...string) string {
	return arm.Str(doc, append(path, "id")...)
}

// childItems returns properties[field] of a document.
func childItems(doc map[string]any, field string) []map[string]any {
	return arm.Arr(doc, "properties", field)
}

// setRO sets a read-only array of references, or removes it when empty.
func setRefs(props map[string]any, key string, ids []string) {
	if len(ids) == 0 {
		delete(props, key)
		return
	}
	props[key] = arm.Refs(ids)
}

// inUse is NRP's generic "still referenced" error.
func inUse(code, what, id string, by []string) error {
	return arm.BadRequest(code, "%s %s is in use by %s and cannot be deleted.", what, id, strings.Join(by, ", "))
}

// defaults fills keys that NRP always returns when the client left them out.
func defaults(m map[string]any, kv ...any) {
	for i := 0; i+1 < len(kv); i += 2 {
		k := kv[i].(string)
		if _, ok := m[k]; !ok {
			m[k] = kv[i+1]
		}
	}
}
