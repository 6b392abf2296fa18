package arm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Documents are generic JSON values (map[string]any, []any, string, bool,
// json.Number, nil) decoded with UseNumber so that numbers round-trip exactly.

// DecodeDoc decodes a JSON object.
func DecodeDoc(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("unexpected data after the JSON object")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("request body must be a JSON object")
	}
	return m, nil
}

// ToModel converts a document into a typed SDK model (e.g. armnetwork.LoadBalancer).
func ToModel(doc map[string]any, out any) error {
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// FromModel converts a typed SDK model back into a document.
func FromModel(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return DecodeDoc(b)
}

// DeepCopy copies a JSON value.
func DeepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[k] = DeepCopy(e)
		}
		return m
	case []any:
		s := make([]any, len(t))
		for i, e := range t {
			s[i] = DeepCopy(e)
		}
		return s
	default:
		return v
	}
}

// CopyDoc deep-copies a document.
func CopyDoc(doc map[string]any) map[string]any {
	if doc == nil {
		return nil
	}
	return DeepCopy(doc).(map[string]any)
}

// DeepMerge merges patch into base and returns base: objects are merged key by
// key (recursively), everything else — arrays included — is replaced. A JSON
// null in patch sets the key to null, as ARM reads an explicit null.
func DeepMerge(base, patch map[string]any) map[string]any {
	if base == nil {
		base = map[string]any{}
	}
	for k, pv := range patch {
		pm, pIsMap := pv.(map[string]any)
		bm, bIsMap := base[k].(map[string]any)
		if pIsMap && bIsMap {
			base[k] = DeepMerge(bm, pm)
			continue
		}
		base[k] = DeepCopy(pv)
	}
	return base
}

// Obj returns doc[path...] as an object, creating missing levels when create is true.
func Obj(doc map[string]any, create bool, path ...string) map[string]any {
	cur := doc
	for _, p := range path {
		next, ok := cur[p].(map[string]any)
		if !ok {
			if !create {
				return nil
			}
			next = map[string]any{}
			cur[p] = next
		}
		cur = next
	}
	return cur
}

// Props returns doc["properties"], creating it if needed.
func Props(doc map[string]any) map[string]any { return Obj(doc, true, "properties") }

// Str returns the string at doc[path...] ("" if absent or not a string).
func Str(doc map[string]any, path ...string) string {
	if len(path) == 0 || doc == nil {
		return ""
	}
	o := Obj(doc, false, path[:len(path)-1]...)
	if o == nil {
		return ""
	}
	s, _ := o[path[len(path)-1]].(string)
	return s
}

// Arr returns the array at doc[path...] as a slice of objects (non-objects skipped).
func Arr(doc map[string]any, path ...string) []map[string]any {
	if len(path) == 0 || doc == nil {
		return nil
	}
	o := Obj(doc, false, path[:len(path)-1]...)
	if o == nil {
		return nil
	}
	raw, _ := o[path[len(path)-1]].([]any)
	out := make([]map[string]any, 0, len(raw))
	for _, e := range raw {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// SetArr stores a slice of objects at doc[path...], creating levels.
func SetArr(doc map[string]any, items []map[string]any, path ...string) {
	o := Obj(doc, true, path[:len(path)-1]...)
	s := make([]any, len(items))
	for i, it := range items {
		s[i] = it
	}
	o[path[len(path)-1]] = s
}

// RefIDs returns the "id" fields of an array of references at doc[path...].
func RefIDs(doc map[string]any, path ...string) []string {
	var ids []string
	for _, r := range Arr(doc, path...) {
		if id, _ := r["id"].(string); id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}

// Refs builds a JSON array of {"id": ...} references.
func Refs(ids []string) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = map[string]any{"id": id}
	}
	return out
}

// FindByName returns the index of the element whose "name" equals name (case-insensitively), or -1.
func FindByName(items []map[string]any, name string) int {
	for i, it := range items {
		if n, _ := it["name"].(string); strings.EqualFold(n, name) {
			return i
		}
	}
	return -1
}

// jsonEqual compares two documents by their JSON encoding.
func jsonEqual(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// PrivatePrefix marks top-level document keys that hold emulator-private state
// (e.g. a service gateway's address locations). They are stored and
// snapshotted but never sent to clients.
const PrivatePrefix = "_azsim"

// publicDoc hides private keys (shallow copy only when there are any).
func publicDoc(doc map[string]any) map[string]any {
	has := false
	for k := range doc {
		if strings.HasPrefix(k, PrivatePrefix) {
			has = true
			break
		}
	}
	if !has {
		return doc
	}
	out := make(map[string]any, len(doc))
	for k, v := range doc {
		if !strings.HasPrefix(k, PrivatePrefix) {
			out[k] = v
		}
	}
	return out
}
