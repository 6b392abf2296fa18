package trim

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

func TestTransforms(t *testing.T) {
	mf := []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationApply}}
	node := func() *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: types.UID("u"), Labels: map[string]string{"a": "b"}, ManagedFields: mf},
			Spec: v1.NodeSpec{ProviderID: "azure:///x", PodCIDR: "10.244.0.0/24"},
			Status: v1.NodeStatus{Images: []v1.ContainerImage{{Names: []string{"img"}, SizeBytes: 1}},
				Addresses:  []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.4"}},
				Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}}}
	}
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Annotations: map[string]string{"k": "v"}, ManagedFields: mf},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer}}
	tomb := cache.DeletedFinalStateUnknown{Key: "n", Obj: node()}
	for _, tc := range []struct {
		name string
		f    cache.TransformFunc
		in   any
		want func(t *testing.T, out any)
	}{
		{"node: managedFields and images dropped, the rest kept", Node, node(), func(t *testing.T, out any) {
			n := out.(*v1.Node)
			if n.ManagedFields != nil || n.Status.Images != nil {
				t.Errorf("not trimmed: %+v", n)
			}
			if n.Spec.ProviderID == "" || n.Spec.PodCIDR == "" || len(n.Status.Addresses) != 1 || len(n.Status.Conditions) != 1 || n.Labels["a"] != "b" {
				t.Errorf("trimmed too much: %+v", n)
			}
		}},
		{"service: managedFields dropped, annotations kept", Object, svc.DeepCopy(), func(t *testing.T, out any) {
			s := out.(*v1.Service)
			if s.ManagedFields != nil || s.Annotations["k"] != "v" || s.Spec.Type != v1.ServiceTypeLoadBalancer {
				t.Errorf("got %+v", s)
			}
		}},
		{"Object leaves a node's images", Object, node(), func(t *testing.T, out any) {
			if n := out.(*v1.Node); n.Status.Images == nil || n.ManagedFields != nil {
				t.Errorf("got %+v", n)
			}
		}},
		{"a tombstone passes unchanged", Node, tomb, func(t *testing.T, out any) {
			if _, ok := out.(cache.DeletedFinalStateUnknown); !ok {
				t.Errorf("got %T", out)
			}
		}},
		{"a non-object passes unchanged", Node, "x", func(t *testing.T, out any) {
			if out != "x" {
				t.Errorf("got %v", out)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := tc.f(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			tc.want(t, out)
		})
	}
}
