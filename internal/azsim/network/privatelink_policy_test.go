package network

import (
	"regexp"
	"testing"
)

func TestDecideConnection(t *testing.T) {
	const owner, other, third = "sub-a", "sub-b", "sub-c"
	cases := []struct {
		name             string
		endpointSub      string
		visibility, auto []string
		manual           bool
		want             ConnectionOutcome
	}{
		{"owner automatic", owner, nil, nil, false, OutcomeApproved},
		{"owner manual waits", owner, nil, nil, true, OutcomePending},
		{"hidden by default", other, nil, nil, true, OutcomeNotVisible},
		{"hidden automatic", other, []string{third}, nil, false, OutcomeNotVisible},
		{"visible manual waits", other, []string{other}, nil, true, OutcomePending},
		{"visible automatic lacks approval right", other, []string{other}, nil, false, OutcomeNoApprovalRight},
		{"star visibility", other, []string{"*"}, nil, true, OutcomePending},
		{"auto-approved automatic", other, []string{"*"}, []string{other}, false, OutcomeApproved},
		{"auto-approved manual", other, []string{other}, []string{other}, true, OutcomeApproved},
		{"auto-approval implies visibility", other, nil, []string{other}, true, OutcomeApproved},
		{"case-insensitive subscriptions", "SUB-B", []string{"sub-b"}, []string{" Sub-B "}, false, OutcomeApproved},
		{"auto-approval of someone else", other, []string{"*"}, []string{third}, true, OutcomePending},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := DecideConnection(ConnectionRequest{ServiceSubscription: owner, EndpointSubscription: c.endpointSub,
				Visibility: c.visibility, AutoApproval: c.auto, Manual: c.manual})
			if got != c.want {
				t.Fatalf("got %d, want %d", got, c.want)
			}
		})
	}
}

func TestOwnerStatus(t *testing.T) {
	cases := []struct {
		old, requested, want string
		ok                   bool
	}{
		{StatePending, "approved", StateApproved, true},
		{StatePending, "Rejected", StateRejected, true},
		{StateApproved, "Rejected", StateRejected, true},
		{StateRejected, "Approved", StateApproved, true},
		{StatePending, "Pending", StatePending, true},
		{StateApproved, "Pending", "Pending", false},
		{StateApproved, "Disconnected", "Disconnected", false},
		{StateApproved, "Removed", "Removed", false},
		{StatePending, "", "", false},
	}
	for _, c := range cases {
		got, ok := ownerStatus(c.old, c.requested)
		if got != c.want || ok != c.ok {
			t.Errorf("ownerStatus(%q, %q) = %q %v, want %q %v", c.old, c.requested, got, ok, c.want, c.ok)
		}
	}
}

func TestAliasFormat(t *testing.T) {
	got := aliasOf("My-PLS", "0f8fad5b-d9cb-469f-a165-70867728950e", "East US")
	if got != "my-pls.0f8fad5b-d9cb-469f-a165-70867728950e.eastus.azure.privatelinkservice" {
		t.Fatal(got)
	}
	if !regexp.MustCompile(`^[a-z0-9._-]+\.[0-9a-f-]{36}\.[a-z0-9]+\.azure\.privatelinkservice$`).MatchString(got) {
		t.Fatal("alias shape")
	}
}
