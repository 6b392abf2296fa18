package tombstone

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestAs(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1"}}
	for _, tc := range []struct {
		name string
		obj  any
		want *v1.Node
	}{
		{"the object", node, node},
		{"a tombstone of it", cache.DeletedFinalStateUnknown{Key: "n1", Obj: node}, node},
		{"another kind", pv, nil},
		{"a tombstone of another kind", cache.DeletedFinalStateUnknown{Key: "pv1", Obj: pv}, nil},
		{"an empty tombstone", cache.DeletedFinalStateUnknown{Key: "n1"}, nil},
		{"nil", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := As[*v1.Node](tc.obj)
			if ok != (tc.want != nil) || got != tc.want {
				t.Errorf("As = %v, %v; want %v", got, ok, tc.want)
			}
		})
	}
}
