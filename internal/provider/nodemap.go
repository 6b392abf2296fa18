package provider

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/azure-ccm/azure-ccm/internal/nodes"
	"github.com/azure-ccm/azure-ccm/internal/tombstone"
)

// feedNodeMap keeps the resolver's node map in step with the node informer.
func feedNodeMap(m *nodes.NodeMap, inf cache.SharedIndexInformer) error {
	asNode := func(obj any) *v1.Node {
		n, _ := tombstone.As[*v1.Node](obj)
		return n
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { m.Set(asNode(obj)) },
		UpdateFunc: func(_, obj any) { m.Set(asNode(obj)) },
		DeleteFunc: func(obj any) {
			if n := asNode(obj); n != nil {
				m.Delete(n.Name)
			}
		},
	})
	if err != nil {
		return err
	}
	m.SetSynced(inf.HasSynced)
	return nil
}
