// Package network holds azsim's Microsoft.Network resource types and resource
// groups (Microsoft.Resources) as arm.TypeSpec values, plus the cross-resource
// derivations (back-references, pool memberships) and the private/public IP
// allocation that the compute handlers reuse.
//
// Private link: privateLinkServices (on a Standard load balancer frontend,
// NAT addresses from subnets with privateLinkServiceNetworkPolicies
// Disabled) and privateEndpoints (in any subscription) with the connection
// approval flow. The service's privateEndpointConnections entry is the
// connection's source of truth; the endpoint shows its state (Disconnected
// once the owner removed it). NRP's managed network interfaces
// (<name>.nic.<guid>), the frontends' privateLinkService reference and the
// subnets' privateEndpoints are kept by derivePrivateLink. DecideConnection
// is the visibility / auto-approval policy.
package network

import (
	"net/http"
	"regexp"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

const ns = "Microsoft.Network/"

// Register adds resource groups and every Microsoft.Network type to the engine,
// and installs the network deriver.
func Register(e *arm.Engine) {
	e.Register(resourceGroupSpec())
	e.Register(
		arm.TypeSpec{Type: ns + "virtualNetworks", APIVersions: arm.NetworkAPIVersions, Prepare: prepareVNet, BeforeDelete: beforeDeleteVNet,
			Actions: vnetActions()},
		arm.TypeSpec{Type: ns + "virtualNetworks/subnets"},
		arm.TypeSpec{Type: ns + "networkSecurityGroups", APIVersions: arm.NetworkAPIVersions, Prepare: prepareNSG, BeforeDelete: beforeDeleteNSG},
		arm.TypeSpec{Type: ns + "networkSecurityGroups/securityRules"},
		arm.TypeSpec{Type: ns + "networkSecurityGroups/defaultSecurityRules"},
		arm.TypeSpec{Type: ns + "routeTables", APIVersions: arm.NetworkAPIVersions, Prepare: prepareRouteTable, BeforeDelete: beforeDeleteRouteTable},
		arm.TypeSpec{Type: ns + "routeTables/routes"},
		arm.TypeSpec{Type: ns + "publicIPAddresses", APIVersions: arm.NetworkAPIVersions, Prepare: preparePublicIP, BeforeDelete: beforeDeletePublicIP},
		arm.TypeSpec{Type: ns + "publicIPPrefixes", APIVersions: arm.PublicIPPrefixAPIVersions, Prepare: preparePublicIPPrefix, BeforeDelete: beforeDeletePublicIPPrefix},
		arm.TypeSpec{Type: ns + "loadBalancers", APIVersions: arm.NetworkAPIVersions, Prepare: prepareLoadBalancer, BeforeDelete: beforeDeleteLoadBalancer,
			Actions: loadBalancerActions()},
		arm.TypeSpec{Type: ns + "loadBalancers/frontendIPConfigurations"},
		arm.TypeSpec{Type: ns + "loadBalancers/backendAddressPools"},
		arm.TypeSpec{Type: ns + "loadBalancers/loadBalancingRules"},
		arm.TypeSpec{Type: ns + "loadBalancers/probes"},
		arm.TypeSpec{Type: ns + "loadBalancers/inboundNatRules"},
		arm.TypeSpec{Type: ns + "loadBalancers/outboundRules"},
		arm.TypeSpec{Type: ns + "loadBalancers/inboundNatPools"},
		arm.TypeSpec{Type: ns + "networkInterfaces", APIVersions: arm.NetworkAPIVersions, Prepare: prepareInterface, BeforeDelete: beforeDeleteInterface,
			DeleteStatus: http.StatusOK, /* NRP answers NIC deletes with 200 + polling headers */
			PutLRO:       arm.LRONone /* and NIC writes synchronously, Succeeded, without polling headers */},
		arm.TypeSpec{Type: ns + "networkInterfaces/ipConfigurations"},
		arm.TypeSpec{Type: ns + "natGateways", APIVersions: arm.NATGatewayAPIVersions, Prepare: prepareNatGateway, BeforeDelete: beforeDeleteNatGateway},
		serviceGatewaySpec(e),
	)
	e.Register(privateLinkSpecs()...)
	registerPrivateLinkActions(e)
	e.AddDeriver(derivePrivateLink)
	e.AddDeriver(derive)
}

var rgNamePattern = regexp.MustCompile(`^[-\w\._\(\)]*[-\w_\(\)]$`)

func resourceGroupSpec() arm.TypeSpec {
	return arm.TypeSpec{
		Type:         arm.ResourceGroupsNamespace + "/resourceGroups",
		APIVersions:  arm.ResourcesAPIVersions,
		ETag:         arm.ETagNone,
		PutLRO:       arm.LRONone,
		DeleteLRO:    arm.LROLocation,
		DeleteStatus: http.StatusAccepted,
		NamePattern:  rgNamePattern,
		NameMaxLen:   90,
		Prepare: func(tx *arm.Tx, w *arm.Write) error {
			// Keep only what ARM keeps for a group.
			doc := map[string]any{}
			for _, k := range []string{"id", "name", "type", "location", "tags", "managedBy"} {
				if v, ok := w.Doc[k]; ok {
					doc[k] = v
				}
			}
			if w.Old != nil && arm.Str(w.Old, "location") != "" && !equalFoldLoc(arm.Str(w.Old, "location"), arm.Str(doc, "location")) {
				return arm.Errorf(http.StatusConflict, "InvalidResourceGroupLocation",
					"Invalid resource group location '%s'. The Resource group already exists in location '%s'.", arm.Str(doc, "location"), arm.Str(w.Old, "location"))
			}
			w.Doc = doc
			return nil
		},
	}
}
