package network

import (
	"strings"
)

// Connection states of a private endpoint connection, as NRP spells them.
const (
	StatePending      = "Pending"
	StateApproved     = "Approved"
	StateRejected     = "Rejected"
	StateDisconnected = "Disconnected"
)

// Descriptions NRP puts on connections it decides itself.
const (
	descAutoApproved     = "Auto-approved"
	descAwaitingApproval = "Awaiting approval"
	descRemoved          = "The connection was removed by the private link service owner."
)

// ConnectionRequest is what a private endpoint asks of a private link service.
type ConnectionRequest struct {
	// ServiceSubscription owns the private link service; EndpointSubscription the endpoint.
	ServiceSubscription, EndpointSubscription string
	// Visibility and AutoApproval are the service's subscription lists ("*" = every subscription).
	Visibility, AutoApproval []string
	// Manual is true for manualPrivateLinkServiceConnections.
	Manual bool
}

// ConnectionOutcome is NRP's answer to a connection request.
type ConnectionOutcome int

// Outcomes.
const (
	// OutcomeNotVisible: the service is hidden from the endpoint's subscription.
	OutcomeNotVisible ConnectionOutcome = iota
	// OutcomeNoApprovalRight: an automatic connection from a subscription that may
	// neither approve nor is auto-approved.
	OutcomeNoApprovalRight
	// OutcomePending: the owner has to approve.
	OutcomePending
	// OutcomeApproved: approved on arrival.
	OutcomeApproved
)

// DecideConnection applies a private link service's visibility and
// auto-approval to a connection request. The service's own subscription sees
// it and may approve its connections: azsim has no role assignments, so the
// owner subscription stands for "the caller holds the approval permission".
// Auto-approval applies to manual and automatic requests alike.
func DecideConnection(r ConnectionRequest) ConnectionOutcome {
	owner := strings.EqualFold(r.ServiceSubscription, r.EndpointSubscription)
	if !owner && !inSubscriptionList(r.Visibility, r.EndpointSubscription) && !inSubscriptionList(r.AutoApproval, r.EndpointSubscription) {
		return OutcomeNotVisible
	}
	if inSubscriptionList(r.AutoApproval, r.EndpointSubscription) {
		return OutcomeApproved
	}
	if r.Manual {
		return OutcomePending
	}
	if owner {
		return OutcomeApproved
	}
	return OutcomeNoApprovalRight
}

// Visible reports whether a subscription can see a private link service
// (checkPrivateLinkServiceVisibility, connection requests by alias or ID).
func Visible(serviceSub, sub string, visibility, autoApproval []string) bool {
	return strings.EqualFold(serviceSub, sub) || inSubscriptionList(visibility, sub) || inSubscriptionList(autoApproval, sub)
}

func inSubscriptionList(list []string, sub string) bool {
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "*" || strings.EqualFold(s, sub) {
			return true
		}
	}
	return false
}

// ownerStatus validates a status the service owner sets with a PUT of the
// connection: Approved or Rejected at any time, Pending only while the
// connection still is Pending. It returns the canonical spelling.
func ownerStatus(old, requested string) (string, bool) {
	for _, s := range []string{StateApproved, StateRejected} {
		if strings.EqualFold(requested, s) {
			return s, true
		}
	}
	if strings.EqualFold(requested, StatePending) && strings.EqualFold(old, StatePending) {
		return StatePending, true
	}
	return requested, false
}

// aliasOf builds a private link service alias: the lower-cased name, a GUID,
// the region and NRP's fixed suffix.
func aliasOf(name, guid, location string) string {
	return strings.ToLower(name) + "." + guid + "." + normLocation(location) + ".azure.privatelinkservice"
}

func normLocation(l string) string { return strings.ToLower(strings.ReplaceAll(l, " ", "")) }
