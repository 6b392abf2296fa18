package dryrun

import (
	"reflect"
	"testing"
)

// TestNewSetMirrorsEveryRegistry: a writer set field the dry-run set leaves nil would make the
// load balancer code fail (or, worse, be wired to the real registry by a later change) the first
// time a dry run touches that resource type.
func TestNewSetMirrorsEveryRegistry(t *testing.T) {
	set := reflect.ValueOf(NewSet(nil, NewRecorder())).Elem()
	for i := range set.NumField() {
		f := set.Type().Field(i)
		if f.Type.Kind() == reflect.Pointer && set.Field(i).IsNil() {
			t.Errorf("dryrun.NewSet leaves writers.Set.%s nil", f.Name)
		}
	}
}
