package localpools

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// AnnotationPlacementLabels carries a hash of a LoadBalancer service's labels. The service
// controller of k8s.io/cloud-provider reconciles a service only when its spec or annotations
// change, not its labels; with serviceLabelSelector, a label change must re-run placement (it may
// move the service), so the CCM mirrors the labels into this annotation and the change of the
// annotation makes the service controller reconcile.
const AnnotationPlacementLabels = "service.beta.kubernetes.io/azure-load-balancer-placement-labels"

// LabelsHash is the annotation value for a label set.
func LabelsHash(l map[string]string) string {
	keys := slices.Sorted(maps.Keys(l))
	b, _ := json.Marshal(struct {
		K []string
		L map[string]string
	}{keys, l})
	return fmt.Sprintf("%x", sha256.Sum256(b))[:16]
}

// RelabelHandler patches the annotation when a LoadBalancer service's labels no longer match
// it. The first sight of a service only records the hash (no reconcile is needed for it).
func RelabelHandler(ctx context.Context, kube kubernetes.Interface) cache.ResourceEventHandler {
	sync := func(svc *v1.Service) {
		if svc.Spec.Type != v1.ServiceTypeLoadBalancer || svc.DeletionTimestamp != nil {
			return
		}
		want := LabelsHash(svc.Labels)
		if svc.Annotations[AnnotationPlacementLabels] == want {
			return
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{AnnotationPlacementLabels: want}}})
		if _, err := kube.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			klog.ErrorS(err, "Recording the labels of a service for placement", "service", svc.Namespace+"/"+svc.Name)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if s, ok := obj.(*v1.Service); ok {
				sync(s)
			}
		},
		UpdateFunc: func(_, obj any) {
			if s, ok := obj.(*v1.Service); ok {
				sync(s)
			}
		},
	}
}
