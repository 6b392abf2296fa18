package arm

import (
	"fmt"
	"net/url"
	"strings"
)

// ResourceID is a parsed ARM path. A path names either a resource (len(Names) ==
// len(Types)) or a collection of resources (len(Names) == len(Types)-1, the last
// type has no name yet). Resource groups are represented with Namespace
// "Microsoft.Resources" and Types ["resourceGroups"] so that they go through the
// same machinery as provider resources.
type ResourceID struct {
	Subscription  string
	ResourceGroup string // empty for subscription-scope paths
	Namespace     string // e.g. Microsoft.Network
	Types         []string
	Names         []string
}

// ResourceGroupsNamespace is the namespace used for /resourceGroups paths.
const ResourceGroupsNamespace = "Microsoft.Resources"

// ParseID parses an ARM path (without query). Matching of the fixed segments
// (subscriptions, resourceGroups, providers) is case-insensitive as in ARM;
// names and types keep the caller's casing.
func ParseID(path string) (ResourceID, error) {
	var id ResourceID
	raw := strings.Trim(path, "/")
	if raw == "" {
		return id, fmt.Errorf("empty resource path")
	}
	segs := strings.Split(raw, "/")
	for i, s := range segs {
		u, err := url.PathUnescape(s)
		if err != nil {
			return id, fmt.Errorf("invalid path segment %q", s)
		}
		if u == "" {
			return id, fmt.Errorf("empty path segment in %q", path)
		}
		segs[i] = u
	}
	if !strings.EqualFold(segs[0], "subscriptions") || len(segs) < 2 {
		return id, fmt.Errorf("path %q does not start with /subscriptions/{id}", path)
	}
	id.Subscription = segs[1]
	rest := segs[2:]
	if len(rest) == 0 {
		return id, nil
	}
	if strings.EqualFold(rest[0], "resourceGroups") {
		if len(rest) == 1 {
			id.Namespace = ResourceGroupsNamespace
			id.Types = []string{"resourceGroups"}
			return id, nil
		}
		id.ResourceGroup = rest[1]
		rest = rest[2:]
		if len(rest) == 0 {
			id.Namespace = ResourceGroupsNamespace
			id.Types = []string{"resourceGroups"}
			id.Names = []string{id.ResourceGroup}
			id.ResourceGroup = ""
			return id, nil
		}
	}
	if !strings.EqualFold(rest[0], "providers") || len(rest) < 3 {
		return id, fmt.Errorf("path %q has no /providers/{namespace}/{type} part", path)
	}
	id.Namespace = rest[1]
	rest = rest[2:]
	for i := 0; i < len(rest); i += 2 {
		id.Types = append(id.Types, rest[i])
		if i+1 < len(rest) {
			id.Names = append(id.Names, rest[i+1])
		}
	}
	return id, nil
}

// MustParseID is ParseID for IDs known to be valid (built by the engine).
func MustParseID(path string) ResourceID {
	id, err := ParseID(path)
	if err != nil {
		panic(err)
	}
	return id
}

// IsCollection reports whether the path names a collection (last type has no name).
func (id ResourceID) IsCollection() bool { return len(id.Names) < len(id.Types) }

// FullType is "Namespace/type1/type2..." in the given casing.
func (id ResourceID) FullType() string {
	if id.Namespace == "" {
		return ""
	}
	return id.Namespace + "/" + strings.Join(id.Types, "/")
}

// Name is the last name of the path ("" for collections).
func (id ResourceID) Name() string {
	if id.IsCollection() || len(id.Names) == 0 {
		return ""
	}
	return id.Names[len(id.Names)-1]
}

// Parent returns the ID of the enclosing resource (one type level up). ok is
// false for top-level resources.
func (id ResourceID) Parent() (ResourceID, bool) {
	n := len(id.Names)
	if id.IsCollection() {
		n++
	}
	if n <= 1 {
		return ResourceID{}, false
	}
	p := id
	p.Types = append([]string(nil), id.Types[:n-1]...)
	p.Names = append([]string(nil), id.Names[:n-1]...)
	return p, true
}

// Child returns the ID of a named child of a resource.
func (id ResourceID) Child(typ, name string) ResourceID {
	c := id
	c.Types = append(append([]string(nil), id.Types...), typ)
	c.Names = append(append([]string(nil), id.Names...), name)
	return c
}

// String renders the path as ARM writes IDs: /subscriptions/s/resourceGroups/g/providers/ns/t/n.
func (id ResourceID) String() string {
	var b strings.Builder
	b.WriteString("/subscriptions/")
	b.WriteString(id.Subscription)
	if id.Namespace == ResourceGroupsNamespace && len(id.Types) == 1 && strings.EqualFold(id.Types[0], "resourceGroups") {
		b.WriteString("/resourceGroups")
		if len(id.Names) == 1 {
			b.WriteString("/")
			b.WriteString(id.Names[0])
		}
		return b.String()
	}
	if id.ResourceGroup != "" {
		b.WriteString("/resourceGroups/")
		b.WriteString(id.ResourceGroup)
	}
	if id.Namespace == "" {
		return b.String()
	}
	b.WriteString("/providers/")
	b.WriteString(id.Namespace)
	for i, t := range id.Types {
		b.WriteString("/")
		b.WriteString(t)
		if i < len(id.Names) {
			b.WriteString("/")
			b.WriteString(id.Names[i])
		}
	}
	return b.String()
}

// Key is the case-insensitive store key of the path.
func (id ResourceID) Key() string { return strings.ToLower(id.String()) }

// Scope is the ID of the resource group (or subscription) that holds the resource.
func (id ResourceID) Scope() string {
	if id.ResourceGroup == "" {
		return "/subscriptions/" + id.Subscription
	}
	return "/subscriptions/" + id.Subscription + "/resourceGroups/" + id.ResourceGroup
}

// ResourceGroupID returns the ID of the enclosing resource group; ok is false
// for subscription-scope paths and for resource groups themselves.
func (id ResourceID) ResourceGroupID() (ResourceID, bool) {
	if id.ResourceGroup == "" {
		return ResourceID{}, false
	}
	return ResourceID{Subscription: id.Subscription, Namespace: ResourceGroupsNamespace,
		Types: []string{"resourceGroups"}, Names: []string{id.ResourceGroup}}, true
}

// KeyOf lower-cases an ID string after normalising it through ParseID when possible.
func KeyOf(id string) string {
	// Fast path: IDs in documents are unescaped, so lower-casing is enough.
	if !strings.Contains(id, "%") {
		return strings.ToLower(strings.TrimRight(id, "/"))
	}
	if p, err := ParseID(id); err == nil {
		return p.Key()
	}
	return strings.ToLower(id)
}

// SameID compares two resource IDs as ARM does (case-insensitively).
func SameID(a, b string) bool { return KeyOf(a) == KeyOf(b) }
