package routes

import (
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/writer"
)

// Change is the route table writer's mutation for ops: the table (created in location when
// missing) with ops applied by Apply. Concurrent node changes become one PUT per batch.
func Change(location string, ops ...Op) writer.Mutation[armnetwork.RouteTable] {
	return func(cur *armnetwork.RouteTable) (*armnetwork.RouteTable, error) {
		if cur == nil {
			cur = &armnetwork.RouteTable{Location: to.Ptr(location)}
		}
		if cur.Properties == nil {
			cur.Properties = &armnetwork.RouteTablePropertiesFormat{}
		}
		if desired, changed := Apply(cur.Properties.Routes, ops); changed {
			cur.Properties.Routes = desired
		}
		return cur, nil
	}
}
