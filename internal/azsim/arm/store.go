package arm

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// resource is one stored top-level (or standalone) resource. Child resources
// (subnets, pools, rules…) live inside their parent's document.
type resource struct {
	ID      ResourceID // canonical casing
	Spec    *TypeSpec
	Doc     map[string]any
	Counter int64 // compute etag counter

	key, typ string // cached lower-cased ID and type
}

func newResource(id ResourceID, spec *TypeSpec, doc map[string]any) *resource {
	return &resource{ID: id, Spec: spec, Doc: doc, key: id.Key(), typ: strings.ToLower(spec.Type)}
}

// Tx is the view of the engine state that handlers, derivers and other
// packages get while holding the engine lock. It must not be kept after the
// callback returns.
type Tx struct {
	e       *Engine
	changed map[string]bool // keys written in this transaction (derivers run if non-empty)
	req     *http.Request
}

// Now is the engine clock.
func (tx *Tx) Now() time.Time { return tx.e.now() }

// Request is the HTTP request being served (nil for Engine.Do transactions).
func (tx *Tx) Request() *http.Request { return tx.req }

// Get returns the stored document of a top-level resource (any casing).
// Callers must not modify it; use Update.
func (tx *Tx) Get(id string) (map[string]any, bool) {
	r, ok := tx.e.res[KeyOf(id)]
	if !ok {
		return nil, false
	}
	return r.Doc, true
}

// GetChild returns a child element (e.g. a subnet) of a stored parent by the
// child's ID, e.g. .../virtualNetworks/v/subnets/s.
func (tx *Tx) GetChild(childID string) (map[string]any, bool) {
	cid, err := ParseID(childID)
	if err != nil || cid.IsCollection() {
		return nil, false
	}
	pid, ok := cid.Parent()
	if !ok {
		return nil, false
	}
	p, ok := tx.e.res[pid.Key()]
	if !ok {
		return nil, false
	}
	field := cid.Types[len(cid.Types)-1]
	if cs := tx.e.spec(cid.FullType()); cs != nil && cs.ChildField != "" {
		field = cs.ChildField
	}
	items := Arr(p.Doc, "properties", field)
	if i := FindByName(items, cid.Name()); i >= 0 {
		return items[i], true
	}
	return nil, false
}

// Exists reports whether a top-level resource or a child element exists.
func (tx *Tx) Exists(id string) bool {
	if _, ok := tx.Get(id); ok {
		return true
	}
	_, ok := tx.GetChild(id)
	return ok
}

// CanonicalID returns the stored casing of an ID if the resource exists.
func (tx *Tx) CanonicalID(id string) (string, bool) {
	if d, ok := tx.Get(id); ok {
		return Str(d, "id"), true
	}
	if d, ok := tx.GetChild(id); ok {
		return Str(d, "id"), true
	}
	return "", false
}

// List returns the documents of a type (case-insensitive full type, e.g.
// "Microsoft.Network/networkInterfaces"), optionally restricted to a scope
// prefix (a subscription or resource group ID; "" for all), sorted by ID.
func (tx *Tx) List(fullType, scope string) []map[string]any {
	var out []map[string]any
	for _, r := range tx.e.sorted(fullType, scope) {
		out = append(out, r.Doc)
	}
	return out
}

// Update applies fn to a stored document. If the document's JSON changed, its
// etag is renewed (children too) and the write counts for the derivers.
func (tx *Tx) Update(id string, fn func(doc map[string]any) error) error {
	r, ok := tx.e.res[KeyOf(id)]
	if !ok {
		return NotFoundTopLevel(MustParseID(id))
	}
	before := CopyDoc(r.Doc)
	if err := fn(r.Doc); err != nil {
		r.Doc = before
		return err
	}
	if !jsonEqual(before, r.Doc) {
		tx.e.finish(r)
		tx.changed[r.key] = true
	}
	return nil
}

// Create stores a new top-level resource document directly (no HTTP, no LRO),
// e.g. for resources another resource implies. The type must be registered.
func (tx *Tx) Create(id string, doc map[string]any) error {
	pid, err := ParseID(id)
	if err != nil {
		return err
	}
	spec := tx.e.spec(pid.FullType())
	if spec == nil {
		return fmt.Errorf("type %s is not registered", pid.FullType())
	}
	cid := tx.e.canonicalize(pid, spec)
	doc["id"], doc["name"], doc["type"] = cid.String(), cid.Name(), spec.Type
	setProvisioningState(doc, "Succeeded")
	r := newResource(cid, spec, doc)
	tx.e.putRes(r)
	tx.e.finish(r)
	tx.changed[cid.Key()] = true
	return nil
}

// Delete removes a top-level resource (and releases its IP reservations).
func (tx *Tx) Delete(id string) bool {
	r, ok := tx.e.res[KeyOf(id)]
	if !ok {
		return false
	}
	tx.e.remove(tx, r)
	return true
}

// MarkChanged makes the derivers run at the end of the transaction.
func (tx *Tx) MarkChanged(id string) { tx.changed[KeyOf(id)] = true }

// ---- etags and server-side fields ----

func newGUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// NewGUID returns a random RFC 4122 v4 UUID string (for resourceGuid fields).
func NewGUID() string { return newGUID() }

// finish renews the etag of a resource and propagates id/type/etag/state to
// registered child arrays.
func (e *Engine) finish(r *resource) {
	switch r.Spec.ETag {
	case ETagWeakGUID:
		r.Doc["etag"] = `W/"` + newGUID() + `"`
	case ETagCounter:
		r.Counter++
		r.Doc["etag"] = `"` + strconv.FormatInt(r.Counter, 10) + `"`
	default:
		delete(r.Doc, "etag")
	}
	e.fillChildren(r)
}

// fillChildren writes id, type, etag and provisioningState into every element
// of the registered child arrays of r (child etag = parent etag).
func (e *Engine) fillChildren(r *resource) {
	state := Str(r.Doc, "properties", "provisioningState")
	etag, _ := r.Doc["etag"].(string)
	for _, cs := range e.childrenOf[strings.ToLower(r.Spec.Type)] {
		typ := cs.Type[strings.LastIndex(cs.Type, "/")+1:]
		for _, c := range Arr(r.Doc, "properties", cs.ChildField) {
			name, _ := c["name"].(string)
			c["id"] = r.ID.Child(typ, name).String()
			c["type"] = cs.Type
			if etag != "" {
				c["etag"] = etag
			}
			if state != "" {
				Props(c)["provisioningState"] = state
			}
		}
	}
}

func setProvisioningState(doc map[string]any, state string) {
	Props(doc)["provisioningState"] = state
}

// sorted returns stored resources of a type within a scope, sorted by key.
func (e *Engine) sorted(fullType, scope string) []*resource {
	t := strings.ToLower(fullType)
	sc := strings.ToLower(strings.TrimRight(scope, "/"))
	in := func(k string) bool { return sc == "" || k == sc || strings.HasPrefix(k, sc+"/") }
	var out []*resource
	if t == "" {
		for k, r := range e.res {
			if in(k) {
				out = append(out, r)
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
		return out
	}
	of := e.byType[t]
	keys, ok := e.sortedKeys[t]
	if !ok {
		keys = make([]string, 0, len(of))
		for k := range of {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		e.sortedKeys[t] = keys
	}
	// Keys sort by scope first: jump to the scope's range.
	start := 0
	if sc != "" {
		start = sort.SearchStrings(keys, sc)
	}
	for _, k := range keys[start:] {
		if !in(k) {
			if sc != "" && !strings.HasPrefix(k, sc) {
				break
			}
			continue
		}
		out = append(out, of[k])
	}
	return out
}

// putRes stores (or replaces) a resource and keeps the type index.
func (e *Engine) putRes(r *resource) {
	if old := e.res[r.key]; old == nil || old.typ != r.typ {
		if old != nil {
			e.delRes(old.key)
		}
		delete(e.sortedKeys, r.typ)
	}
	e.res[r.key] = r
	m := e.byType[r.typ]
	if m == nil {
		m = map[string]*resource{}
		e.byType[r.typ] = m
	}
	m[r.key] = r
}

func (e *Engine) delRes(key string) {
	r := e.res[key]
	if r == nil {
		return
	}
	delete(e.res, key)
	delete(e.byType[r.typ], key)
	delete(e.sortedKeys, r.typ)
}

// reindex rebuilds the type index from res (after Restore / Reset).
func (e *Engine) reindex() {
	e.byType, e.sortedKeys = map[string]map[string]*resource{}, map[string][]string{}
	for _, r := range e.res {
		m := e.byType[r.typ]
		if m == nil {
			m = map[string]*resource{}
			e.byType[r.typ] = m
		}
		m[r.key] = r
	}
}

// remove deletes a resource (and, for resource groups, everything inside),
// releasing IP reservations and running AfterDelete hooks.
func (e *Engine) remove(tx *Tx, r *resource) {
	key := r.key
	if r.Spec.Type == "Microsoft.Resources/resourceGroups" {
		scope := "/subscriptions/" + strings.ToLower(r.ID.Subscription) + "/resourcegroups/" + strings.ToLower(r.ID.Name())
		for _, c := range e.sorted("", scope) {
			if c != r {
				e.remove(tx, c)
			}
		}
	}
	e.delRes(key)
	e.ipam.releaseUnder(key)
	tx.changed[key] = true
	if r.Spec.AfterDelete != nil {
		r.Spec.AfterDelete(tx, r.ID, r.Doc)
	}
}

// Engine returns the engine the transaction belongs to (a key for per-engine
// registries in other packages).
func (tx *Tx) Engine() *Engine { return tx.e }

// Modify applies fn to a stored document and renews its etag unconditionally;
// for callers that already know the document changes (cheaper than Update).
func (tx *Tx) Modify(id string, fn func(doc map[string]any)) bool {
	r, ok := tx.e.res[KeyOf(id)]
	if !ok {
		return false
	}
	fn(r.Doc)
	tx.e.finish(r)
	tx.changed[r.key] = true
	return true
}
