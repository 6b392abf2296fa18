// Package tombstone reads the object of an informer's delete notification, which is either the
// object or, for a deletion the informer missed (a relist after a watch gap), a
// cache.DeletedFinalStateUnknown holding the last state it knew.
package tombstone

import "k8s.io/client-go/tools/cache"

// As returns obj, or the object a tombstone holds, as a T; false when it is neither. A handler
// that ignored tombstones would keep state for a deleted object for the life of the process.
func As[T any](obj any) (T, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	t, ok := obj.(T)
	return t, ok
}
