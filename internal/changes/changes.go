// Package changes compares two versions of an ARM resource model and says what differs, child
// by child: which frontend, rule, probe, backend pool, security rule or route was added,
// removed or changed, and which fields of it. The drift audit names what it repaired with it,
// and the plan command what it would write. It is pure: models are compared through their
// JSON form (the SDK models marshal exactly what ARM receives), so one comparison serves every
// resource type.
package changes

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Op is what a write does to a child (or to the resource itself when Collection is "").
type Op string

const (
	// Added: the child is in the new version only.
	Added Op = "added"
	// Removed: the child is in the old version only.
	Removed Op = "removed"
	// Changed: the child is in both, with different fields.
	Changed Op = "changed"
)

// Change is one child that differs, or the resource's own fields (Collection and Name empty).
type Change struct {
	// Collection is the JSON name of the child's list, e.g. "loadBalancingRules",
	// "securityRules", "backendAddressPools"; "" for the resource's own fields.
	Collection string
	// Name is the child's name.
	Name string
	Op   Op
	// Fields are the differences inside a changed child (or the resource), sorted by path.
	Fields []Field
}

// Field is one differing value. Path is relative to the child, e.g.
// "properties.intervalInSeconds" or "properties.loadBalancerBackendAddresses[node-1]" (a nested
// named child). Old and New are short renderings; Added/Removed elements of a list of values
// are listed instead of the whole lists.
type Field struct {
	Path     string
	Old, New string
	// Added and Removed are the elements of a list of plain values that only one side has.
	Added, Removed []string
}

// String renders the field for a one-line message.
func (f Field) String() string {
	if len(f.Added) > 0 || len(f.Removed) > 0 {
		var parts []string
		for _, a := range f.Added {
			parts = append(parts, "+"+a)
		}
		for _, r := range f.Removed {
			parts = append(parts, "-"+r)
		}
		return f.Path + " " + strings.Join(parts, " ")
	}
	switch {
	case f.Old == "":
		return f.Path + " = " + f.New
	case f.New == "":
		return f.Path + " " + f.Old + " → (unset)"
	}
	return f.Path + " " + f.Old + " → " + f.New
}

// ignored are fields that change with every write of a resource (or are set by ARM alone) and
// say nothing about what a write does.
var ignored = map[string]bool{"etag": true, "provisioningState": true}

// Diff compares before and after (ARM models, or anything that marshals to JSON objects; nil for
// a resource that does not exist). Changes come sorted by collection, then name; the
// resource's own fields (if any differ) first.
func Diff(before, after any) ([]Change, error) {
	a, err := toJSON(before)
	if err != nil {
		return nil, err
	}
	b, err := toJSON(after)
	if err != nil {
		return nil, err
	}
	d := &differ{}
	d.object("", a, b)
	return d.result(), nil
}

func toJSON(v any) (map[string]any, error) {
	if v == nil {
		return map[string]any{}, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("changes: model is not a JSON object: %w", err)
	}
	if m == nil { // a nil pointer marshals to null
		m = map[string]any{}
	}
	return m, nil
}

type differ struct {
	// own are the resource's own field differences.
	own []Field
	// children by collection and name.
	children []Change
}

func (d *differ) result() []Change {
	var out []Change
	if len(d.own) > 0 {
		sortFields(d.own)
		out = append(out, Change{Op: Changed, Fields: d.own})
	}
	sort.SliceStable(d.children, func(i, j int) bool {
		if d.children[i].Collection != d.children[j].Collection {
			return d.children[i].Collection < d.children[j].Collection
		}
		return strings.ToLower(d.children[i].Name) < strings.ToLower(d.children[j].Name)
	})
	for _, c := range d.children {
		sortFields(c.Fields)
	}
	return append(out, d.children...)
}

func sortFields(fs []Field) {
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].Path < fs[j].Path })
}

// object compares two JSON objects of the resource (not inside a named child).
func (d *differ) object(path string, a, b map[string]any) {
	for _, k := range keys(a, b) {
		if ignored[k] {
			continue
		}
		av, aok := a[k]
		bv, bok := b[k]
		p := join(path, k)
		if la, lb, ok := namedLists(av, aok, bv, bok); ok {
			d.collection(k, la, lb)
			continue
		}
		if ma, mb, ok := objects(av, aok, bv, bok); ok {
			d.object(p, ma, mb)
			continue
		}
		d.own = append(d.own, leaf(p, av, aok, bv, bok)...)
	}
}

// collection compares a list of named children of the resource.
func (d *differ) collection(name string, a, b map[string]map[string]any) {
	for _, n := range names(a, b) {
		ca, aok := a[strings.ToLower(n)]
		cb, bok := b[strings.ToLower(n)]
		switch {
		case !aok:
			d.children = append(d.children, Change{Collection: name, Name: childName(cb, n), Op: Added})
		case !bok:
			d.children = append(d.children, Change{Collection: name, Name: childName(ca, n), Op: Removed})
		default:
			if fs := fieldsOf("", ca, cb); len(fs) > 0 {
				d.children = append(d.children, Change{Collection: name, Name: childName(cb, n), Op: Changed, Fields: fs})
			}
		}
	}
}

// fieldsOf lists the differences inside a child; nested named lists (a pool's addresses, a
// NIC's ip configurations) become one field per nested child added, removed or changed.
func fieldsOf(path string, a, b map[string]any) []Field {
	var out []Field
	for _, k := range keys(a, b) {
		if ignored[k] {
			continue
		}
		av, aok := a[k]
		bv, bok := b[k]
		if k == "name" && aok && bok && sameName(av, bv) {
			continue // children are matched by name, case-insensitively
		}
		p := join(path, k)
		if la, lb, ok := namedLists(av, aok, bv, bok); ok {
			for _, n := range names(la, lb) {
				ca, aok := la[strings.ToLower(n)]
				cb, bok := lb[strings.ToLower(n)]
				np := p + "[" + n + "]"
				switch {
				case !aok:
					out = append(out, Field{Path: np, New: "added"})
				case !bok:
					out = append(out, Field{Path: np, Old: "present", New: "removed"})
				default:
					out = append(out, fieldsOf(np, ca, cb)...)
				}
			}
			continue
		}
		if ma, mb, ok := objects(av, aok, bv, bok); ok {
			out = append(out, fieldsOf(p, ma, mb)...)
			continue
		}
		out = append(out, leaf(p, av, aok, bv, bok)...)
	}
	return out
}

// leaf compares two values that are not both objects or both named lists.
func leaf(path string, av any, aok bool, bv any, bok bool) []Field {
	if aok && bok && equal(av, bv) {
		return nil
	}
	if !aok && !bok {
		return nil
	}
	// A missing value and an empty one mean the same to ARM.
	if (!aok || empty(av)) && (!bok || empty(bv)) {
		return nil
	}
	la, aIsList := av.([]any)
	lb, bIsList := bv.([]any)
	if (aIsList || !aok || av == nil) && (bIsList || !bok || bv == nil) && (aIsList || bIsList) {
		added, removed := listDiff(la, lb)
		if len(added) > 0 || len(removed) > 0 {
			return []Field{{Path: path, Added: added, Removed: removed}}
		}
		// Same elements in another order.
		return []Field{{Path: path, Old: Render(av), New: Render(bv)}}
	}
	f := Field{Path: path}
	if aok && av != nil {
		f.Old = Render(av)
	}
	if bok && bv != nil {
		f.New = Render(bv)
	}
	return []Field{f}
}

func listDiff(a, b []any) (added, removed []string) {
	count := map[string]int{}
	for _, v := range a {
		count[Render(v)]++
	}
	for _, v := range b {
		r := Render(v)
		if count[r] > 0 {
			count[r]--
			continue
		}
		added = append(added, r)
	}
	for _, v := range a {
		r := Render(v)
		if count[r] > 0 {
			count[r]--
			removed = append(removed, r)
		}
	}
	sort.Strings(added)
	sort.Strings(removed)
	return added, removed
}

func empty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}

func equal(a, b any) bool {
	ra, _ := json.Marshal(a)
	rb, _ := json.Marshal(b)
	return string(ra) == string(rb)
}

// objects reports whether both values are JSON objects (a missing one counts as empty).
func objects(av any, aok bool, bv any, bok bool) (map[string]any, map[string]any, bool) {
	ma, aIs := av.(map[string]any)
	mb, bIs := bv.(map[string]any)
	if (aIs || !aok || av == nil) && (bIs || !bok || bv == nil) && (aIs || bIs) {
		if ma == nil {
			ma = map[string]any{}
		}
		if mb == nil {
			mb = map[string]any{}
		}
		return ma, mb, true
	}
	return nil, nil, false
}

// namedLists reports whether both values are lists of objects with a name (a missing or empty
// list counts as such when the other one is), keyed by lower-cased name: ARM matches children by
// name, case-insensitively, whatever their order.
func namedLists(av any, aok bool, bv any, bok bool) (map[string]map[string]any, map[string]map[string]any, bool) {
	la, aIs := named(av)
	lb, bIs := named(bv)
	aEmpty := !aok || empty(av)
	bEmpty := !bok || empty(bv)
	switch {
	case aIs && bIs, aIs && bEmpty, bIs && aEmpty:
		if la == nil {
			la = map[string]map[string]any{}
		}
		if lb == nil {
			lb = map[string]map[string]any{}
		}
		return la, lb, true
	}
	return nil, nil, false
}

// named returns the list's elements by lower-cased name if every element is an object with a
// non-empty, unique name.
func named(v any) (map[string]map[string]any, bool) {
	l, ok := v.([]any)
	if !ok || len(l) == 0 {
		return nil, false
	}
	out := make(map[string]map[string]any, len(l))
	for _, e := range l {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, false
		}
		n, _ := m["name"].(string)
		if n == "" {
			return nil, false
		}
		k := strings.ToLower(n)
		if _, dup := out[k]; dup {
			return nil, false
		}
		out[k] = m
	}
	return out, true
}

func sameName(a, b any) bool {
	sa, aok := a.(string)
	sb, bok := b.(string)
	return aok && bok && strings.EqualFold(sa, sb)
}

func childName(m map[string]any, fallback string) string {
	if n, _ := m["name"].(string); n != "" {
		return n
	}
	return fallback
}

// names are the children's names of both sides, in a stable order.
func names(a, b map[string]map[string]any) []string {
	seen := map[string]bool{}
	var out []string
	for _, side := range []map[string]map[string]any{a, b} {
		for k, m := range side {
			if seen[k] {
				continue
			}
			seen[k] = true
			out = append(out, childName(m, k))
		}
	}
	sort.Slice(out, func(i, j int) bool { return strings.ToLower(out[i]) < strings.ToLower(out[j]) })
	return out
}

func keys(a, b map[string]any) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range []map[string]any{a, b} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// maxRender bounds a rendered value: a message names what changed, it does not dump it.
const maxRender = 120

// Render is a short text of a JSON value: strings as they are (resource IDs cut to what
// follows "/providers/"), other values as compact JSON, long ones cut.
func Render(v any) string {
	var s string
	switch v := v.(type) {
	case string:
		s = ShortID(v)
	case nil:
		s = "null"
	case map[string]any:
		if id, ok := v["id"].(string); ok && len(v) == 1 {
			s = ShortID(id) // a reference
			break
		}
		b, _ := json.Marshal(v)
		s = string(b)
	default:
		b, _ := json.Marshal(v)
		s = string(b)
	}
	if len(s) > maxRender {
		s = s[:maxRender-1] + "…"
	}
	return s
}

// ShortID cuts an ARM resource ID to what follows "/providers/" (the type and name that
// matter in a message); other strings are returned as they are.
func ShortID(s string) string {
	if !strings.HasPrefix(strings.ToLower(s), "/subscriptions/") {
		return s
	}
	if i := strings.LastIndex(strings.ToLower(s), "/providers/"); i >= 0 {
		return s[i+len("/providers/"):]
	}
	return s
}

// Kind names what a change is about, for metrics and messages: frontend, rule, probe,
// pool_member, nsg_rule, public_ip, route, or other (resource-level fields, outbound rules …).
// resourceType is the ARM type, e.g. "Microsoft.Network/loadBalancers".
func Kind(resourceType string, c Change) string {
	t := strings.ToLower(resourceType)
	t = t[strings.LastIndex(t, "/")+1:]
	switch t {
	case "publicipaddresses":
		return "public_ip"
	case "networkinterfaces", "virtualmachines", "virtualmachinescalesets":
		// NIC-based pool membership: the pool references of ip configurations.
		return "pool_member"
	case "routetables":
		if c.Collection == "routes" {
			return "route"
		}
	case "networksecuritygroups":
		if c.Collection == "securityRules" {
			return "nsg_rule"
		}
	case "loadbalancers", "backendaddresspools":
		switch c.Collection {
		case "frontendIPConfigurations":
			return "frontend"
		case "loadBalancingRules":
			return "rule"
		case "probes":
			return "probe"
		case "backendAddressPools":
			return "pool_member"
		}
	}
	return "other"
}

// Describe is a short text of a change for an event or a log line, e.g.
// "loadBalancingRules a1-TCP-80 added" or "probes a1-TCP-80 changed (properties.intervalInSeconds 10 → 5)".
func Describe(c Change) string {
	what := c.Collection
	if c.Name != "" {
		what += " " + c.Name
	}
	if what == "" {
		what = "resource"
	}
	if c.Op != Changed || len(c.Fields) == 0 {
		return what + " " + string(c.Op)
	}
	fs := make([]string, 0, len(c.Fields))
	for _, f := range c.Fields {
		fs = append(fs, f.String())
	}
	const maxFields = 4
	if len(fs) > maxFields {
		fs = append(fs[:maxFields], fmt.Sprintf("and %d more", len(c.Fields)-maxFields))
	}
	return what + " changed (" + strings.Join(fs, "; ") + ")"
}
