package zonechoice

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

var threeZones = []string{"eastus-1", "eastus-2", "eastus-3", "eastus-2"}

func TestChoose(t *testing.T) {
	base := func(mod func(*Input)) Input {
		in := Input{Region: "eastus", Zoned: true, NodeZones: threeZones}
		mod(&in)
		return in
	}
	cases := []struct {
		name     string
		in       Input
		want     string
		rule     string
		wantErr  error
		errMatch string
	}{
		// zoned: false
		{name: "non-zonal", in: base(func(i *Input) { i.Zoned = false }), want: "", rule: RuleNonZonal},
		{name: "non-zonal with WaitForFirstConsumer", in: base(func(i *Input) {
			i.Zoned, i.WaitForFirstConsumer, i.SelectedNode, i.SelectedNodeZone = false, true, "n1", "eastus-1"
		}), want: "", rule: RuleNonZonal},
		{name: "non-zonal without zoned nodes", in: base(func(i *Input) { i.Zoned, i.NodeZones = false, []string{"0", "1"} }), want: "", rule: RuleNonZonal},
		{name: "non-zonal with zone is an error", in: base(func(i *Input) {
			i.Zoned, i.HasZone, i.ClassZones = false, true, []string{"eastus-1"}
		}), wantErr: ErrInvalidClass},
		{name: "non-zonal with allowedTopologies is an error", in: base(func(i *Input) {
			i.Zoned, i.AllowedTopologyZones = false, []string{"eastus-1"}
		}), wantErr: ErrInvalidClass},

		// WaitForFirstConsumer
		{name: "WFFC selected node zone", in: base(func(i *Input) {
			i.WaitForFirstConsumer, i.SelectedNode, i.SelectedNodeZone = true, "n2", "eastus-2"
		}), want: "eastus-2", rule: RuleSelectedNode},
		{name: "WFFC node zone label case-insensitive", in: base(func(i *Input) {
			i.WaitForFirstConsumer, i.SelectedNode, i.SelectedNodeZone = true, "n2", "EastUS-3"
		}), want: "eastus-3", rule: RuleSelectedNode},
		{name: "WFFC ignores round-robin counter", in: base(func(i *Input) {
			i.WaitForFirstConsumer, i.SelectedNode, i.SelectedNodeZone, i.Seq = true, "n1", "eastus-1", 7
		}), want: "eastus-1", rule: RuleSelectedNode},
		{name: "WFFC within allowedTopologies", in: base(func(i *Input) {
			i.WaitForFirstConsumer, i.SelectedNode, i.SelectedNodeZone = true, "n1", "eastus-1"
			i.AllowedTopologyZones = []string{"eastus-1", "eastus-2"}
		}), want: "eastus-1", rule: RuleSelectedNode},
		{name: "WFFC node outside allowedTopologies", in: base(func(i *Input) {
			i.WaitForFirstConsumer, i.SelectedNode, i.SelectedNodeZone = true, "n3", "eastus-3"
			i.AllowedTopologyZones = []string{"eastus-1"}
		}), wantErr: ErrNodeNotZoned, errMatch: "does not allow"},
		{name: "WFFC with zone is an error", in: base(func(i *Input) {
			i.WaitForFirstConsumer, i.SelectedNode, i.SelectedNodeZone = true, "n1", "eastus-1"
			i.HasZone, i.ClassZones = true, []string{"eastus-1"}
		}), wantErr: ErrInvalidClass, errMatch: "WaitForFirstConsumer"},
		{name: "WFFC with zones is an error", in: base(func(i *Input) {
			i.WaitForFirstConsumer, i.SelectedNode, i.SelectedNodeZone = true, "n1", "eastus-1"
			i.HasZones, i.ClassZones = true, []string{"eastus-1", "eastus-2"}
		}), wantErr: ErrInvalidClass, errMatch: "WaitForFirstConsumer"},
		{name: "WFFC without selected node", in: base(func(i *Input) { i.WaitForFirstConsumer = true }), errMatch: "no selected node"},
		{name: "WFFC node with fault domain label", in: base(func(i *Input) {
			i.WaitForFirstConsumer, i.SelectedNode, i.SelectedNodeZone = true, "fd-node", "1"
		}), wantErr: ErrNodeNotZoned, errMatch: "fd-node"},
		{name: "WFFC node without zone label", in: base(func(i *Input) {
			i.WaitForFirstConsumer, i.SelectedNode = true, "bare"
		}), wantErr: ErrNodeNotZoned},
		{name: "WFFC node in another region", in: base(func(i *Input) {
			i.WaitForFirstConsumer, i.SelectedNode, i.SelectedNodeZone = true, "w", "westus-1"
		}), wantErr: ErrNodeNotZoned},

		// Immediate with zone / zones
		{name: "zone", in: base(func(i *Input) { i.HasZone, i.ClassZones = true, []string{"eastus-3"} }), want: "eastus-3", rule: RuleClassZones},
		{name: "zone as bare number", in: base(func(i *Input) { i.HasZone, i.ClassZones = true, []string{"2"} }), want: "eastus-2", rule: RuleClassZones},
		{name: "zone without nodes is still honoured", in: base(func(i *Input) {
			i.HasZone, i.ClassZones, i.NodeZones = true, []string{"eastus-3"}, []string{"eastus-1"}
		}), want: "eastus-3", rule: RuleClassZones},
		{name: "zones round-robin seq 0", in: base(func(i *Input) { i.HasZones, i.ClassZones = true, []string{"eastus-2", "eastus-1"} }), want: "eastus-1", rule: RuleClassZones},
		{name: "zones round-robin seq 1", in: base(func(i *Input) {
			i.HasZones, i.ClassZones, i.Seq = true, []string{"eastus-2", "eastus-1"}, 1
		}), want: "eastus-2", rule: RuleClassZones},
		{name: "zones prefer zones with nodes", in: base(func(i *Input) {
			i.HasZones, i.ClassZones, i.NodeZones, i.Seq = true, []string{"eastus-1", "eastus-3"}, []string{"eastus-3"}, 4
		}), want: "eastus-3", rule: RuleClassZones},
		{name: "zone and zones both set", in: base(func(i *Input) {
			i.HasZone, i.HasZones, i.ClassZones = true, true, []string{"eastus-1"}
		}), wantErr: ErrInvalidClass, errMatch: "only one"},
		{name: "zone of another region", in: base(func(i *Input) { i.HasZone, i.ClassZones = true, []string{"westus-1"} }), wantErr: ErrInvalidClass, errMatch: "westus-1"},
		{name: "zone garbage", in: base(func(i *Input) { i.HasZone, i.ClassZones = true, []string{"eastus-a"} }), wantErr: ErrInvalidClass},
		{name: "zones empty", in: base(func(i *Input) { i.HasZones, i.ClassZones = true, []string{" "} }), wantErr: ErrInvalidClass, errMatch: "empty"},

		// Immediate with allowedTopologies
		{name: "allowedTopologies single", in: base(func(i *Input) { i.AllowedTopologyZones = []string{"eastus-2"} }), want: "eastus-2", rule: RuleAllowed},
		{name: "allowedTopologies round-robin", in: base(func(i *Input) {
			i.AllowedTopologyZones, i.Seq = []string{"eastus-3", "eastus-1"}, 1
		}), want: "eastus-3", rule: RuleAllowed},
		{name: "allowedTopologies prefer zones with nodes", in: base(func(i *Input) {
			i.AllowedTopologyZones, i.NodeZones, i.Seq = []string{"eastus-1", "eastus-2"}, []string{"eastus-2", "0"}, 3
		}), want: "eastus-2", rule: RuleAllowed},
		{name: "allowedTopologies and zones both set", in: base(func(i *Input) {
			i.HasZones, i.ClassZones, i.AllowedTopologyZones = true, []string{"eastus-1"}, []string{"eastus-2"}
		}), wantErr: ErrInvalidClass, errMatch: "both"},
		{name: "allowedTopologies and zone both set", in: base(func(i *Input) {
			i.HasZone, i.ClassZones, i.AllowedTopologyZones = true, []string{"eastus-1"}, []string{"eastus-1"}
		}), wantErr: ErrInvalidClass, errMatch: "both"},
		{name: "allowedTopologies bad value", in: base(func(i *Input) { i.AllowedTopologyZones = []string{"nowhere"} }), wantErr: ErrInvalidClass, errMatch: "allowedTopologies"},

		// Immediate, round-robin over active zones
		{name: "round-robin seq 0", in: base(func(i *Input) {}), want: "eastus-1", rule: RuleRoundRobin},
		{name: "round-robin seq 2", in: base(func(i *Input) { i.Seq = 2 }), want: "eastus-3", rule: RuleRoundRobin},
		{name: "round-robin wraps", in: base(func(i *Input) { i.Seq = 4 }), want: "eastus-2", rule: RuleRoundRobin},
		{name: "round-robin skips fault-domain labels", in: base(func(i *Input) {
			i.NodeZones, i.Seq = []string{"0", "1", "eastus-2", "", "westus-1"}, 5
		}), want: "eastus-2", rule: RuleRoundRobin},
		{name: "no zoned nodes", in: base(func(i *Input) { i.NodeZones = []string{"0", "1"} }), wantErr: ErrNoZonedNodes, errMatch: "no node has an availability zone"},
		{name: "no nodes", in: base(func(i *Input) { i.NodeZones = nil }), wantErr: ErrNoZonedNodes},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := Choose(c.in)
			if c.wantErr != nil || c.errMatch != "" {
				if err == nil {
					t.Fatalf("want error, got %+v", d)
				}
				if c.wantErr != nil && !errors.Is(err, c.wantErr) {
					t.Fatalf("error %v is not %v", err, c.wantErr)
				}
				if c.errMatch != "" && !strings.Contains(err.Error(), c.errMatch) {
					t.Fatalf("error %q does not mention %q", err, c.errMatch)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Zone != c.want || d.Rule != c.rule {
				t.Fatalf("got %q (%s), want %q (%s)", d.Zone, d.Rule, c.want, c.rule)
			}
		})
	}
}

// TestRoundRobinEven: N consecutive decisions spread evenly over the active zones.
func TestRoundRobinEven(t *testing.T) {
	count := map[string]int{}
	for seq := uint64(10); seq < 10+9; seq++ {
		d, err := Choose(Input{Region: "eastus", Zoned: true, NodeZones: threeZones, Seq: seq})
		if err != nil {
			t.Fatal(err)
		}
		count[d.Zone]++
	}
	if fmt.Sprint(count) != "map[eastus-1:3 eastus-2:3 eastus-3:3]" {
		t.Fatalf("uneven: %v", count)
	}
}

func TestZoneHelpers(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string
		ok   bool
	}{{"eastus-1", "eastus-1", true}, {"EASTUS-12", "eastus-12", true}, {"1", "", false}, {"eastus-", "", false}, {"westus-1", "", false}, {"eastus2-1", "", false}} {
		got, ok := ZoneOf("eastus", c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("ZoneOf(%q) = %q,%v want %q,%v", c.in, got, ok, c.want, c.ok)
		}
	}
	if ARMZone("eastus-3") != "3" || ARMZone("2") != "2" {
		t.Error("ARMZone")
	}
}

func TestSpreadIndex(t *testing.T) {
	idx := func(name string) uint64 {
		t.Helper()
		i, ok := SpreadIndex(name)
		if !ok {
			t.Fatalf("SpreadIndex(%q) not ok", name)
		}
		return i
	}
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"data-web-0", true}, {"web-12", true}, {"data-my-web-3", true},
		{"data", false}, {"data-web", false}, {"-1", false}, {"data-web-x1", false},
		{"data-web-99999999999", false}, {"data-web-", false},
	} {
		if _, ok := SpreadIndex(c.name); ok != c.ok {
			t.Errorf("SpreadIndex(%q) ok=%v want %v", c.name, ok, c.ok)
		}
	}
	if idx("data-web-1") != idx("data-web-0")+1 || idx("data-web-7") != idx("data-web-0")+7 {
		t.Error("consecutive ordinals are not consecutive indexes")
	}
	// The claims of one replica (other templates, a StatefulSet name with dashes) share a zone.
	if idx("logs-web-2") != idx("data-web-2") || idx("data-my-web-2") != idx("logs-my-web-2") || idx("web-2") != idx("data-web-2") {
		t.Error("claims of one replica get different indexes")
	}
	// Replicas of a StatefulSet spread evenly over the class's zones, starting anywhere.
	for _, sts := range []string{"web", "db", "cache"} {
		count := map[string]int{}
		for ord := 0; ord < 6; ord++ {
			d, err := Choose(Input{Region: "eastus", Zoned: true, NodeZones: threeZones, Seq: idx(fmt.Sprintf("data-%s-%d", sts, ord))})
			if err != nil {
				t.Fatal(err)
			}
			count[d.Zone]++
		}
		if fmt.Sprint(count) != "map[eastus-1:2 eastus-2:2 eastus-3:2]" {
			t.Errorf("StatefulSet %s: %v", sts, count)
		}
	}
}
