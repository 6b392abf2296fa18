// Package tags decides the Azure tags of the resources the CCM owns from azure.json (tags,
// tagsMap, systemTags), as the existing provider does: every configured tag is added or updated
// on every reconcile; a tag the configuration does not name is removed only when systemTags is
// set and the tag starts with none of its keys. Pure functions, table-tested; the callers apply the result
// in the mutations they submit to the resources' writers.
package tags

import (
	"slices"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
)

// Policy is the tag configuration of azure.json.
type Policy struct {
	// Config are tags and tagsMap merged (tagsMap wins); keys as written.
	Config map[string]string
	// System are the systemTags keys. When set, the CCM removes every tag of its resources that
	// the configuration does not name and that starts with none of them (the existing
	// provider's rule).
	System []string
}

// Parse builds the policy from azure.json's tags ("k=v,k2=v2"), tagsMap and systemTags ("k,k2").
// Keys are trimmed; an entry without "=" or with an empty key is skipped (the existing provider
// skips it too); of two keys differing only in case the later wins.
func Parse(csv string, m map[string]string, system string) Policy {
	p := Policy{}
	set := func(k, v string) {
		if p.Config == nil {
			p.Config = map[string]string{}
		}
		for old := range p.Config {
			if strings.EqualFold(old, k) {
				delete(p.Config, old)
			}
		}
		p.Config[k] = v
	}
	for _, kv := range strings.Split(csv, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if k = strings.TrimSpace(k); ok && k != "" {
			set(k, strings.TrimSpace(v))
		}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if tk := strings.TrimSpace(k); tk != "" {
			set(tk, m[k])
		}
	}
	for _, k := range strings.Split(system, ",") {
		if k = strings.TrimSpace(k); k != "" {
			p.System = append(p.System, k)
		}
	}
	return p
}

// Keep says which tag keys must never be removed whatever the policy (a resource's ownership
// tags); nil keeps none.
type Keep func(key string) bool

// Reconcile makes tags carry want: a missing key is added, a key present in another case is
// updated in place (ARM treats keys case-insensitively), and, when system keys are given, every
// other key that is neither wanted, a system tag (IsSystem) nor kept is removed. It edits and returns tags
// (a new map when tags is nil and something is added) and reports a change.
func Reconcile(tags map[string]*string, want map[string]string, system []string, keep Keep) (map[string]*string, bool) {
	changed := false
	for k, v := range want {
		key, found := find(tags, k)
		switch {
		case !found:
			if tags == nil {
				tags = map[string]*string{}
			}
			tags[k] = to.Ptr(v)
			changed = true
		case tags[key] == nil || *tags[key] != v:
			tags[key] = to.Ptr(v)
			changed = true
		}
	}
	if len(system) == 0 {
		return tags, changed
	}
	for k := range tags {
		if _, wanted := findString(want, k); wanted {
			continue
		}
		if IsSystem(system, k) || (keep != nil && keep(k)) {
			continue
		}
		delete(tags, k)
		changed = true
	}
	return tags, changed
}

// IsSystem reports whether key is a system tag: it starts with one of the system keys, compared
// without case, as the existing provider matches them (so "aks-managed" covers
// "aks-managed-cluster-name").
func IsSystem(system []string, key string) bool {
	k := strings.ToLower(key)
	return slices.ContainsFunc(system, func(s string) bool { return strings.HasPrefix(k, strings.ToLower(s)) })
}

// ApplyConfig reconciles the configured tags on a load balancer, NSG or route table. As in the
// existing provider nothing happens while no tag is configured, so systemTags alone never strips
// a resource.
func (p Policy) ApplyConfig(tags map[string]*string) (map[string]*string, bool) {
	if len(p.Config) == 0 {
		return tags, false
	}
	return Reconcile(tags, p.Config, p.System, nil)
}

// Remove deletes the given keys (case-insensitively) unless keep or the policy (configured or
// system tag) claims them; it reports a change.
func (p Policy) Remove(tags map[string]*string, keys []string, keep Keep) bool {
	changed := false
	for _, k := range keys {
		if _, configured := findString(p.Config, k); configured || (keep != nil && keep(k)) {
			continue
		}
		if key, found := find(tags, k); found {
			delete(tags, key)
			changed = true
		}
	}
	return changed
}

// Equal reports whether two tag sets hold the same keys (case-insensitively) and values.
func Equal(a, b map[string]*string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		key, ok := find(b, k)
		if !ok || deref(v) != deref(b[key]) {
			return false
		}
	}
	return true
}

func find(tags map[string]*string, k string) (string, bool) {
	if _, ok := tags[k]; ok {
		return k, true
	}
	for key := range tags {
		if strings.EqualFold(key, k) {
			return key, true
		}
	}
	return "", false
}

func findString(m map[string]string, k string) (string, bool) {
	if _, ok := m[k]; ok {
		return k, true
	}
	for key := range m {
		if strings.EqualFold(key, k) {
			return key, true
		}
	}
	return "", false
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
