package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// applyFieldManager names the framework as the owner of what Apply writes.
const applyFieldManager = "azure-ccm-e2e"

// Apply creates or updates every object of a multi-document YAML stream (rendered manifests,
// e.g. the chart's RBAC) with server-side apply, as `kubectl apply --server-side` would, in the
// order given. Objects of a namespaced kind without a namespace go to "default".
func (e *Env) Apply(ctx context.Context, manifests []byte) error {
	dyn, err := dynamic.NewForConfig(e.RestConfig)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(e.Kube.Discovery()))
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("apply: decode: %w", err)
		}
		if len(obj.Object) == 0 {
			continue // an empty document between two "---"
		}
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("apply %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		body, err := obj.MarshalJSON()
		if err != nil {
			return err
		}
		res := dyn.Resource(m.Resource)
		var ri dynamic.ResourceInterface = res
		if m.Scope.Name() == "namespace" {
			ns := obj.GetNamespace()
			if ns == "" {
				ns = metav1.NamespaceDefault
			}
			ri = res.Namespace(ns)
		}
		force := true
		if _, err := ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: applyFieldManager, Force: &force}); err != nil {
			return fmt.Errorf("apply %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
	}
}
