// Package zonechoice decides the availability zone of a new managed disk from the StorageClass
// and the cluster's nodes. It is pure: the caller gathers the inputs (class parameters, the
// selected node's zone label, the zone labels of all nodes, the claim's turn in the spread) and
// acts on the answer.
package zonechoice

import (
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Input is everything the choice depends on. Zones are Kubernetes zone label values,
// "<region>-<n>" (e.g. "eastus-1"); the answer is the same form, or "" for a non-zonal disk.
type Input struct {
	// Region is the cluster's location, normalised ("eastus").
	Region string
	// Zoned is the class parameter `zoned` (default true).
	Zoned bool
	// WaitForFirstConsumer is the class volumeBindingMode.
	WaitForFirstConsumer bool
	// ClassZones are the class's `zone` / `zones` values (already split); HasZone and HasZones
	// say which parameter was present, for the "both set" error.
	ClassZones        []string
	HasZone, HasZones bool
	// AllowedTopologyZones are the zone values of the class's allowedTopologies.
	AllowedTopologyZones []string
	// SelectedNode and SelectedNodeZone are the node the scheduler chose (WaitForFirstConsumer)
	// and its topology.kubernetes.io/zone label ("" when the node has none).
	SelectedNode, SelectedNodeZone string
	// NodeZones are the zone labels of every node (any value; non-zonal nodes carry a fault
	// domain number, which is not an availability zone).
	NodeZones []string
	// Seq picks among several candidate zones: candidate Seq mod n of the sorted candidates.
	// The caller derives it per claim: SpreadIndex for StatefulSet-style claim names, else the
	// claim's turn in its class (a counter per StorageClass, one turn per claim).
	Seq uint64
}

// Decision is the zone to create the disk in.
type Decision struct {
	// Zone is "<region>-<n>", or "" for a non-zonal disk.
	Zone string
	// Rule names the rule that decided, for logs and events.
	Rule string
}

// The rules, as reported in Decision.Rule.
const (
	RuleNonZonal       = "zoned=false"
	RuleSelectedNode   = "WaitForFirstConsumer: zone of the selected node"
	RuleClassZones     = "Immediate: zone/zones of the class"
	RuleAllowed        = "Immediate: allowedTopologies of the class"
	RuleRoundRobin     = "Immediate: round-robin over the active zones"
	errorPrefixInvalid = "invalid StorageClass"
)

// ErrInvalidClass marks errors a retry cannot fix: the class itself is inconsistent.
var ErrInvalidClass = errors.New(errorPrefixInvalid)

// ErrNodeNotZoned marks "the selected node has no availability zone": the scheduler should pick
// another node (a zonal disk cannot be attached to it).
var ErrNodeNotZoned = errors.New("selected node has no availability zone")

// ErrNoZonedNodes marks "no node is in an availability zone" for round-robin.
var ErrNoZonedNodes = errors.New("no zoned nodes")

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidClass}, a...)...)
}

// Choose applies the rules:
//   - zoned=false: a non-zonal disk; zone, zones or allowedTopologies are errors;
//   - WaitForFirstConsumer: the selected node's zone (which must be in allowedTopologies when
//     those are set); zone/zones are errors; a node without a zone is ErrNodeNotZoned;
//   - Immediate with zone/zones or allowedTopologies (not both): round-robin over those, preferring
//     the ones that have nodes;
//   - Immediate with neither: round-robin over the active zones (zones that have nodes);
//     none is ErrNoZonedNodes.
func Choose(in Input) (Decision, error) {
	if in.HasZone && in.HasZones {
		return Decision{}, invalid("only one of the parameters zone and zones may be set")
	}
	classZones, err := normalise(in.Region, in.ClassZones, "zone/zones")
	if err != nil {
		return Decision{}, err
	}
	allowed, err := normalise(in.Region, in.AllowedTopologyZones, "allowedTopologies")
	if err != nil {
		return Decision{}, err
	}
	hasClassZones := in.HasZone || in.HasZones || len(classZones) > 0
	if !in.Zoned {
		if hasClassZones || len(allowed) > 0 {
			return Decision{}, invalid("zone, zones and allowedTopologies need zoned to be true (zoned: false makes a non-zonal disk)")
		}
		return Decision{Rule: RuleNonZonal}, nil
	}
	if hasClassZones && len(classZones) == 0 {
		return Decision{}, invalid("zone/zones is set but empty")
	}
	if in.WaitForFirstConsumer {
		if hasClassZones {
			return Decision{}, invalid("zone/zones must not be set with volumeBindingMode WaitForFirstConsumer (the disk goes to the selected node's zone; use allowedTopologies to restrict it)")
		}
		if in.SelectedNode == "" {
			return Decision{}, fmt.Errorf("volumeBindingMode is WaitForFirstConsumer but the claim has no selected node")
		}
		zone, ok := ZoneOf(in.Region, in.SelectedNodeZone)
		if !ok {
			return Decision{}, fmt.Errorf("%w: node %s has zone label %q, not an availability zone of %s; a zoned disk cannot be attached to it (use a class with zoned: false for non-zoned nodes)",
				ErrNodeNotZoned, in.SelectedNode, in.SelectedNodeZone, in.Region)
		}
		if len(allowed) > 0 && !contains(allowed, zone) {
			return Decision{}, fmt.Errorf("%w: node %s is in zone %s, which allowedTopologies %v does not allow",
				ErrNodeNotZoned, in.SelectedNode, zone, allowed)
		}
		return Decision{Zone: zone, Rule: RuleSelectedNode}, nil
	}
	active := ActiveZones(in.Region, in.NodeZones)
	switch {
	case hasClassZones && len(allowed) > 0:
		return Decision{}, invalid("zone/zones and allowedTopologies must not both be set")
	case hasClassZones:
		return Decision{Zone: pick(preferActive(classZones, active), in.Seq), Rule: RuleClassZones}, nil
	case len(allowed) > 0:
		return Decision{Zone: pick(preferActive(allowed, active), in.Seq), Rule: RuleAllowed}, nil
	}
	if len(active) == 0 {
		return Decision{}, fmt.Errorf("%w: zoned is true but no node has an availability zone of %s (topology.kubernetes.io/zone=%s-<n>); add zoned nodes, name the zone in the class, or set zoned: false",
			ErrNoZonedNodes, in.Region, in.Region)
	}
	return Decision{Zone: pick(active, in.Seq), Rule: RuleRoundRobin}, nil
}

var zoneNumber = regexp.MustCompile(`^[0-9]+$`)

// ZoneOf returns the "<region>-<n>" form of a zone label value or class zone, and whether it is
// an availability zone of region at all. A bare "<n>" is accepted as zone n of the region; a fault
// domain label on a non-zonal node is only accepted in the "<region>-<n>" form, which fault
// domains never have.
func ZoneOf(region, v string) (string, bool) {
	v = strings.ToLower(strings.TrimSpace(v))
	n, ok := strings.CutPrefix(v, strings.ToLower(region)+"-")
	if !ok || !zoneNumber.MatchString(n) {
		return "", false
	}
	return v, true
}

// ActiveZones are the distinct availability zones among the node zone labels, sorted.
func ActiveZones(region string, nodeZones []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, z := range nodeZones {
		if zone, ok := ZoneOf(region, z); ok && !seen[zone] {
			seen[zone] = true
			out = append(out, zone)
		}
	}
	sort.Strings(out)
	return out
}

// ARMZone is the number ARM wants ("eastus-2" -> "2").
func ARMZone(zone string) string {
	if i := strings.LastIndexByte(zone, '-'); i >= 0 {
		return zone[i+1:]
	}
	return zone
}

// normalise checks class zones and returns them deduplicated and sorted. A bare "<n>" becomes
// "<region>-<n>"; another region's zone is an error (a disk lives in the cluster's region).
func normalise(region string, zones []string, what string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, z := range zones {
		z = strings.TrimSpace(z)
		if z == "" {
			continue
		}
		if zoneNumber.MatchString(z) {
			z = strings.ToLower(region) + "-" + z
		}
		zone, ok := ZoneOf(region, z)
		if !ok {
			return nil, invalid("%s value %q is not an availability zone of region %s (want %s-<n>)", what, z, region, region)
		}
		if !seen[zone] {
			seen[zone] = true
			out = append(out, zone)
		}
	}
	sort.Strings(out)
	return out, nil
}

// preferActive keeps the candidates that have nodes, unless none has: a disk in a zone without
// nodes cannot be used yet, but the class explicitly allows it.
func preferActive(candidates, active []string) []string {
	var both []string
	for _, c := range candidates {
		if contains(active, c) {
			both = append(both, c)
		}
	}
	if len(both) == 0 {
		return candidates
	}
	return both
}

// SpreadIndex is the spread position of a claim whose name ends in "-<ordinal>", the names a
// StatefulSet gives its claims ("<template>-<statefulset>-<ordinal>"): a hash of the last
// dash-separated word before the ordinal plus the ordinal. Consecutive replicas thus land in
// consecutive zones, whatever else is provisioned meanwhile, and the claims of one replica (same
// StatefulSet and ordinal, different templates) land in the same zone, so its pod can mount them
// all. Hashing only the last word keeps that true when the StatefulSet's name has dashes (two
// StatefulSets ending in the same word then start in the same zone). ok is false for other names.
func SpreadIndex(claimName string) (index uint64, ok bool) {
	dash := strings.LastIndexByte(claimName, '-')
	if dash <= 0 {
		return 0, false
	}
	ordinal, err := strconv.ParseUint(claimName[dash+1:], 10, 32)
	if err != nil {
		return 0, false
	}
	base := claimName[:dash]
	if i := strings.LastIndexByte(base, '-'); i >= 0 {
		base = base[i+1:]
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(base))
	return uint64(h.Sum32()) + ordinal, true
}

func pick(zones []string, seq uint64) string { return zones[seq%uint64(len(zones))] }

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
