package difftracker

import (
	"reflect"
	"testing"
)

func TestDiff(t *testing.T) {
	type locs = locations
	s := func(names ...string) set { return toSet(names) }
	tests := []struct {
		name             string
		applied, desired locs
		full             bool
		want             LocationsUpdate
	}{
		{name: "both empty", applied: locs{}, desired: locs{}},
		{name: "in step", applied: locs{"10.0.0.4": {"10.244.0.5": s("a")}}, desired: locs{"10.0.0.4": {"10.244.0.5": s("a")}}},
		{name: "new location is sent whole",
			applied: locs{}, desired: locs{"10.0.0.4": {"10.244.0.5": s("a", "b")}},
			want: LocationsUpdate{Locations: []Location{{Node: "10.0.0.4", Full: true, Addresses: []Address{{IP: "10.244.0.5", Services: []string{"a", "b"}}}}}}},
		{name: "location no longer wanted is dropped",
			applied: locs{"10.0.0.4": {"10.244.0.5": s("a")}, "10.0.0.5": {"10.244.1.5": s("a")}}, desired: locs{"10.0.0.5": {"10.244.1.5": s("a")}},
			want: LocationsUpdate{Locations: []Location{{Node: "10.0.0.4"}}}},
		{name: "only the changed address of a location",
			applied: locs{"10.0.0.4": {"10.244.0.5": s("a"), "10.244.0.6": s("a"), "10.244.0.7": s("a")}},
			desired: locs{"10.0.0.4": {"10.244.0.5": s("a"), "10.244.0.6": s("a", "b"), "10.244.0.8": s("a")}},
			want: LocationsUpdate{Locations: []Location{{Node: "10.0.0.4", Addresses: []Address{
				{IP: "10.244.0.6", Services: []string{"a", "b"}}, {IP: "10.244.0.7", Services: []string{}}, {IP: "10.244.0.8", Services: []string{"a"}}}}}}},
		{name: "every address replaced: the location is sent whole",
			applied: locs{"10.0.0.4": {"10.244.0.5": s("a")}}, desired: locs{"10.0.0.4": {"10.244.0.9": s("a")}},
			want: LocationsUpdate{Locations: []Location{{Node: "10.0.0.4", Full: true, Addresses: []Address{{IP: "10.244.0.9", Services: []string{"a"}}}}}}},
		{name: "address with no services in Azure is removed",
			applied: locs{"10.0.0.4": {"10.244.0.5": s("a"), "10.244.0.6": s()}}, desired: locs{"10.0.0.4": {"10.244.0.5": s("a")}},
			want: LocationsUpdate{Locations: []Location{{Node: "10.0.0.4", Addresses: []Address{{IP: "10.244.0.6", Services: []string{}}}}}}},
		{name: "full resync lists every desired location",
			applied: locs{"10.0.0.4": {"10.244.0.5": s("a")}}, desired: locs{"10.0.0.5": {"10.244.1.5": s("a")}, "10.0.0.4": {"10.244.0.5": s("a")}}, full: true,
			want: LocationsUpdate{Full: true, Locations: []Location{
				{Node: "10.0.0.4", Full: true, Addresses: []Address{{IP: "10.244.0.5", Services: []string{"a"}}}},
				{Node: "10.0.0.5", Full: true, Addresses: []Address{{IP: "10.244.1.5", Services: []string{"a"}}}}}}},
		{name: "full resync of nothing still clears Azure", applied: locs{"10.0.0.4": {"10.244.0.5": s("a")}}, desired: locs{}, full: true,
			want: LocationsUpdate{Full: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Diff(tc.applied, tc.desired, tc.full)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Diff:\n got  %+v\n want %+v", got, tc.want)
			}
			// Applying the diff must always reach the desired side.
			after := applyUpdate(tc.applied, got)
			if d := Diff(after, tc.desired, false); !d.Empty() {
				t.Fatalf("after applying, still a diff: %+v (state %v)", d, after)
			}
		})
	}
}

func TestApplySemantics(t *testing.T) {
	applied := locations{"n1": {"p1": toSet([]string{"a"}), "p2": toSet([]string{"a"})}, "n2": {"p3": toSet([]string{"b"})}}
	tests := []struct {
		name string
		u    LocationsUpdate
		want locations
	}{
		{name: "partial address update keeps the others", u: LocationsUpdate{Locations: []Location{{Node: "n1", Addresses: []Address{{IP: "p2", Services: []string{"a", "b"}}}}}},
			want: locations{"n1": {"p1": toSet([]string{"a"}), "p2": toSet([]string{"a", "b"})}, "n2": {"p3": toSet([]string{"b"})}}},
		{name: "partial address without services deletes it", u: LocationsUpdate{Locations: []Location{{Node: "n1", Addresses: []Address{{IP: "p2"}}}}},
			want: locations{"n1": {"p1": toSet([]string{"a"})}, "n2": {"p3": toSet([]string{"b"})}}},
		{name: "partial location without addresses deletes it", u: LocationsUpdate{Locations: []Location{{Node: "n2"}}},
			want: locations{"n1": {"p1": toSet([]string{"a"}), "p2": toSet([]string{"a"})}}},
		{name: "full location replaces its addresses", u: LocationsUpdate{Locations: []Location{{Node: "n1", Full: true, Addresses: []Address{{IP: "p9", Services: []string{"c"}}}}}},
			want: locations{"n1": {"p9": toSet([]string{"c"})}, "n2": {"p3": toSet([]string{"b"})}}},
		{name: "full update replaces everything", u: LocationsUpdate{Full: true, Locations: []Location{{Node: "n3", Full: true, Addresses: []Address{{IP: "p4", Services: []string{"a"}}}}}},
			want: locations{"n3": {"p4": toSet([]string{"a"})}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := applyUpdate(applied, tc.u); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v want %v", got, tc.want)
			}
		})
	}
	if len(applied["n1"]) != 2 || len(applied) != 2 {
		t.Fatalf("Apply modified its input: %v", applied)
	}
}

// TestTrackerLifecycle walks a service through registration, membership changes, deletion
// and drain: addresses only name registered services, and a deleted service is unregistered
// only after the gateway no longer lists any of its addresses.
func TestTrackerLifecycle(t *testing.T) {
	tr := New()
	a := Service{Name: "uid-a", Kind: Inbound, Config: "tcp:80>8080"}
	tr.SetService(a)
	tr.SetMembers("uid-a", map[string]string{"10.244.0.5": "10.0.0.4", "10.244.1.5": "10.0.0.5", "not-an-ip": "10.0.0.5"})
	if got := tr.LocationsDiff(); !got.Empty() {
		t.Fatalf("addresses sent before the service is registered: %+v", got)
	}
	if got := tr.ToRegister(); !reflect.DeepEqual(got, []Service{a}) {
		t.Fatalf("ToRegister = %v", got)
	}
	tr.RecordRegistered(a)
	if len(tr.ToRegister()) != 0 || tr.InSync() {
		t.Fatal("registered service still to register, or in sync with addresses pending")
	}
	u := tr.LocationsDiff()
	if len(u.Locations) != 2 || u.Addresses() != 2 || u.Full {
		t.Fatalf("first diff = %+v", u)
	}
	tr.RecordLocations(u)
	if !tr.InSync() {
		t.Fatalf("not in sync after recording: %+v", tr.LocationsDiff())
	}
	// Config change → re-register.
	a2 := a
	a2.Config = "tcp:81>8080"
	tr.SetService(a2)
	if got := tr.ToRegister(); !reflect.DeepEqual(got, []Service{a2}) {
		t.Fatalf("changed config: ToRegister = %v", got)
	}
	tr.RecordRegistered(a2)
	// Pod moves from node 10.0.0.5 to 10.0.0.4: one location dropped, one address added.
	tr.SetMembers("uid-a", map[string]string{"10.244.0.5": "10.0.0.4", "10.244.0.9": "10.0.0.4"})
	u = tr.LocationsDiff()
	want := LocationsUpdate{Locations: []Location{{Node: "10.0.0.4", Addresses: []Address{{IP: "10.244.0.9", Services: []string{"uid-a"}}}}, {Node: "10.0.0.5"}}}
	if !reflect.DeepEqual(u, want) {
		t.Fatalf("move diff = %+v", u)
	}
	tr.RecordLocations(u)
	// Delete: not removable until the addresses are gone.
	tr.DeleteService("uid-a")
	if got := tr.ToRemove(); len(got) != 0 {
		t.Fatalf("removable while addresses still reference it: %v", got)
	}
	u = tr.LocationsDiff()
	if !reflect.DeepEqual(u, LocationsUpdate{Locations: []Location{{Node: "10.0.0.4"}}}) {
		t.Fatalf("drain diff = %+v", u)
	}
	tr.RecordLocations(u)
	if got := tr.ToRemove(); !reflect.DeepEqual(got, []Service{a2}) {
		t.Fatalf("ToRemove = %v", got)
	}
	tr.RecordRemoved("uid-a")
	if !tr.InSync() || len(tr.Applied()) != 0 {
		t.Fatal("not in sync after removal")
	}
}

func TestTrackerSharedAddressAndDrift(t *testing.T) {
	tr := New()
	in, out := Service{Name: "uid-a", Kind: Inbound}, Service{Name: "egress1", Kind: Outbound}
	tr.SetService(in)
	tr.SetService(out)
	tr.SetMembers("uid-a", map[string]string{"10.244.0.5": "10.0.0.4"})
	tr.SetMembers("egress1", map[string]string{"10.244.0.5": "10.0.0.4"})
	tr.RecordRegistered(in, out)
	u := tr.LocationsDiff()
	if !reflect.DeepEqual(u.Locations[0].Addresses, []Address{{IP: "10.244.0.5", Services: []string{"egress1", "uid-a"}}}) {
		t.Fatalf("shared address = %+v", u)
	}
	tr.RecordLocations(u)
	// Restart: Azure says something else (an address removed behind our back, a stale one).
	tr.LoadApplied([]Service{in, out, {Name: "gone", Kind: Inbound}}, map[string]map[string][]string{
		"10.0.0.9": {"10.244.9.9": {"gone"}}})
	if got := tr.ToRemove(); len(got) != 0 {
		t.Fatalf("stale service removable while referenced: %v", got)
	}
	u = tr.LocationsDiff()
	if len(u.Locations) != 2 || u.Full {
		t.Fatalf("resync diff = %+v", u)
	}
	tr.RecordLocations(u)
	if got := tr.ToRemove(); !reflect.DeepEqual(got, []Service{{Name: "gone", Kind: Inbound}}) {
		t.Fatalf("ToRemove after drain = %v", got)
	}
	tr.MarkDrift()
	if tr.InSync() || !tr.LocationsDiff().Full {
		t.Fatal("MarkDrift did not ask for a full update")
	}
	tr.RecordLocations(tr.LocationsDiff())
	tr.RecordRemoved("gone")
	if !tr.InSync() {
		t.Fatalf("not in sync: %+v", tr.LocationsDiff())
	}
}
