package network

import (
	"net/http"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// Private link errors. Where NRP's code and message are publicly recorded
// they are reproduced; where they are not, azsim chooses a code in NRP's
// style (marked "azsim's code") and docs/azsim.md lists which is which.

// errPLSSubnetPolicies: NRP's code and message.
func errPLSSubnetPolicies(pls, subnet string) error {
	return arm.BadRequest("PrivateLinkServiceCannotBeCreatedInSubnetThatHasNetworkPoliciesEnabled",
		"Private link service %s cannot be created in a subnet %s since it has private link service network policies enabled.", pls, subnet)
}

// errSubnetPoliciesInUse: NRP's code; the message follows NRP's private
// endpoint twin of this error.
func errSubnetPoliciesInUse(subnet string) error {
	return arm.BadRequest("PrivateLinkServiceNetworkPoliciesCannotBeEnabledOnPrivateLinkServiceSubnet",
		"Private link service network policies cannot be enabled on private link service subnet %s.", subnet)
}

// errFrontendCount: NRP's code and message.
func errFrontendCount(plsName string, n int) error {
	return arm.BadRequest("InvalidNumberOfPrivateLinkServiceLoadBalancerFrontendIpConfigurationsSpecified",
		"Cannot have more than one load balancer frontend IP configuration on the private link service. Private link service %s has %d load balancer frontend IP configurations specified.", plsName, n)
}

// errLBDeleteWithPLS: NRP's code and message.
func errLBDeleteWithPLS(lb, pls string) error {
	return arm.BadRequest("CannotDeleteLoadBalancerWithPrivateLinkService",
		"Cannot delete load balancer %s since it is referenced by private link service %s. Please delete private link service prior to deleting load balancer.", lb, pls)
}

// errPLSDeleteWithConnections: NRP's code and message.
func errPLSDeleteWithConnections(pls string, n int) error {
	return arm.BadRequest("PrivateLinkServiceWithPrivateEndpointConnectionsCannotBeDeleted",
		"Private link service %s cannot be deleted since it has %d private endpoint connections. Please delete all private endpoint connections before deleting the private link service.", pls, n)
}

// errNotVisible: NRP's code (for a service that does not exist or that the
// endpoint's subscription may not see).
func errNotVisible(ref string) error {
	return arm.BadRequest("ThirdPartyPrivateLinkServiceProvidedDuringPrivateEndpointCreationDoesNotExistOrIsNotVisible",
		"Third-party Private Link Service Id %s provided during private endpoint creation does not exist or is not visible.", ref)
}

// errLinkedAuthorization: ARM's linked-scope authorization failure (403), as
// for an automatic connection by a caller without the approval permission.
func errLinkedAuthorization(pe, pls string) error {
	return arm.Errorf(http.StatusForbidden, "LinkedAuthorizationFailed",
		"The client has permission to perform action 'Microsoft.Network/privateEndpoints/write' on scope '%s', however it does not have permission to perform action(s) 'Microsoft.Network/privateLinkServices/privateEndpointConnectionsApproval/action' on the linked scope(s) '%s' (respectively) or the linked scope(s) are invalid.", pe, pls)
}

// errNICOfPrivateEndpoint: NRP's code.
func errNICOfPrivateEndpoint(nic, pe string) error {
	return arm.BadRequest("CannotModifyNicAttachedToPrivateEndpoint",
		"Network interface %s is attached to private endpoint %s and cannot be modified by the user.", nic, pe)
}

// errNICOfPrivateLinkService: azsim's code, the private link service twin of
// CannotModifyNicAttachedToPrivateEndpoint.
func errNICOfPrivateLinkService(nic, pls string) error {
	return arm.BadRequest("CannotModifyNicAttachedToPrivateLinkService",
		"Network interface %s is attached to private link service %s and cannot be modified by the user.", nic, pls)
}

// errPLSOnNonStandardLB: azsim's code.
func errPLSOnNonStandardLB(pls, fe, sku string) error {
	return arm.BadRequest("PrivateLinkServiceRequiresStandardSkuLoadBalancer",
		"Private link service %s references frontend IP configuration %s of a %s SKU load balancer; private link services are supported on Standard load balancers only.", pls, fe, sku)
}

// errPLSPerLBLimit: azsim's code.
func errPLSPerLBLimit(lb string, limit int) error {
	return arm.BadRequest("PrivateLinkServiceCountPerLoadBalancerLimitReached",
		"Load balancer %s already has %d private link services, the maximum a load balancer supports.", lb, limit)
}

// errFrontendInUseByPLS: azsim's code.
func errFrontendInUseByPLS(fe, pls string) error {
	return arm.BadRequest("LoadBalancerFrontendIPConfigurationInUseByPrivateLinkService",
		"Frontend IP configuration %s is referenced by private link service %s and cannot be deleted. Delete the private link service first.", fe, pls)
}

// errFrontendHasPLS: azsim's code.
func errFrontendHasPLS(fe, other string) error {
	return arm.BadRequest("LoadBalancerFrontendIPConfigurationAlreadyUsedByPrivateLinkService",
		"Frontend IP configuration %s is already used by private link service %s; a frontend IP configuration serves one private link service.", fe, other)
}

// errChangeLoadBalancer: azsim's code (NRP documents that the load balancer
// of a private link service cannot be changed).
func errChangeLoadBalancer(pls, oldLB, newLB string) error {
	return arm.BadRequest("PrivateLinkServiceLoadBalancerCannotBeChanged",
		"The load balancer of private link service %s cannot be changed from %s to %s. Create a new private link service instead.", pls, oldLB, newLB)
}

// errPLSIPConfigCount: azsim's code.
func errPLSIPConfigCount(pls string, n, limit int) error {
	return arm.BadRequest("InvalidNumberOfPrivateLinkServiceIpConfigurations",
		"Private link service %s has %d IP configurations; it needs at least 1 and at most %d.", pls, n, limit)
}

// errPLSPrimary: azsim's code.
func errPLSPrimary(pls string) error {
	return arm.BadRequest("PrivateLinkServiceMustHaveExactlyOnePrimaryIpConfiguration",
		"Private link service %s has more than one primary IP configuration.", pls)
}

// errConnectionStatus: azsim's code.
func errConnectionStatus(conn, old, requested string) error {
	return arm.BadRequest("InvalidPrivateEndpointConnectionStatus",
		"Private endpoint connection %s cannot change its status from %s to %s; the service owner may set Approved or Rejected (remove a connection with DELETE).", conn, old, requested)
}

// errEndpointConnectionCount: azsim's code.
func errEndpointConnectionCount(pe string, n int) error {
	return arm.BadRequest("InvalidNumberOfPrivateLinkServiceConnectionsSpecified",
		"Private endpoint %s has %d private link service connections; it needs exactly one (in privateLinkServiceConnections or manualPrivateLinkServiceConnections).", pe, n)
}

// errInvalidServiceID: NRP's code for a malformed target.
func errInvalidServiceID(pe, ref string) error {
	return arm.BadRequest("InvalidPrivateLinkServiceId",
		"Private link service id %s of private endpoint %s is not a private link service resource ID or alias.", ref, pe)
}

// errCustomNICExists: azsim's code; the message is NRP's.
func errCustomNICExists(pe, nic string) error {
	return arm.BadRequest("CustomNetworkInterfaceNameAlreadyExists",
		"%s contains custom NIC name %s which already exists.", pe, nic)
}

// errCustomNICChange: azsim's code.
func errCustomNICChange(pe, oldName, newName string) error {
	return arm.BadRequest("CannotChangeCustomNetworkInterfaceName",
		"The network interface name of private endpoint %s cannot be changed from %s to %s.", pe, oldName, newName)
}

// errFeatureNotRegistered: ARM's code for preview features.
func errFeatureNotRegistered(sub, what string) error {
	return arm.BadRequest("SubscriptionNotRegisteredForFeature",
		"Subscription %s is not registered for the feature required by %s; azsim emulates private link services in front of load balancers only.", sub, what)
}
