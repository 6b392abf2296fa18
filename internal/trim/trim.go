// Package trim drops from informer caches the parts of Kubernetes objects the CCM never reads:
// every object's managedFields (server-side apply bookkeeping, often larger than the rest of
// the object) and a Node's image list (every image on the node, with its sizes). At thousands of
// nodes these were most of the cache. The trimmed objects are only read and diffed: updates send
// what the API server returned or a patch of the fields that changed, and an update without
// managedFields keeps the server's.
package trim

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
)

// Object drops managedFields from any API object; other values pass unchanged.
func Object(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil && m.GetManagedFields() != nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// Node is Object plus the node's image list.
func Node(obj any) (any, error) {
	if n, ok := obj.(*v1.Node); ok {
		n.Status.Images = nil
	}
	return Object(obj)
}

// Set installs Node on nodes and Object on others; it must run before the informer starts
// (SetTransform refuses a running informer, and the error says so).
func Set(inf cache.SharedIndexInformer, node bool) error {
	if node {
		return inf.SetTransform(Node)
	}
	return inf.SetTransform(Object)
}

var _ cache.TransformFunc = Object
var _ cache.TransformFunc = Node
