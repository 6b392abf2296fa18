package naming

import (
	"slices"
	"strings"
	"testing"
)

// FuzzServiceTag: a k8s-azure-service tag value parses into non-empty trimmed keys without
// commas, and formatting them gives a value that parses back to the same (deduplicated) keys.
func FuzzServiceTag(f *testing.F) {
	for _, s := range []string{"default/web", "default/web,ns2/api", " a/b , ,a/b,", "", ",,,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		keys := ParseServiceTag(v)
		for _, k := range keys {
			if k == "" || strings.Contains(k, ",") || k != strings.TrimSpace(k) {
				t.Fatalf("%q: key %q", v, k)
			}
		}
		formatted := FormatServiceTag(keys)
		again := ParseServiceTag(formatted)
		var dedup []string
		for _, k := range keys {
			if !slices.Contains(dedup, k) {
				dedup = append(dedup, k)
			}
		}
		if !slices.Equal(again, dedup) {
			t.Fatalf("%q -> %q -> %q -> %q", v, keys, formatted, again)
		}
	})
}
