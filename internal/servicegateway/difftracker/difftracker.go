// Package difftracker keeps the two sides of the container-based (service gateway) load
// balancing state: what the cluster wants (services and the pod addresses that belong to them,
// by node) and what has been applied to Azure. It computes the difference as the smallest
// service gateway requests and records every successful request back, so that the two sides
// converge. It makes no call itself and is safe for concurrent use.
package difftracker

import (
	"maps"
	"net/netip"
	"slices"
	"sort"
	"sync"
)

// Kind is the service gateway service type.
type Kind string

const (
	// Inbound is a LoadBalancer Service (Service-SKU load balancer behind the gateway).
	Inbound Kind = "Inbound"
	// Outbound is an egress identity (StandardV2 NAT gateway behind the gateway).
	Outbound Kind = "Outbound"
)

// Service is one gateway service. Name is its identity: the lower-case Service UID (inbound)
// or the egress identity (outbound). Config fingerprints the Azure resources built for it;
// a different Config means the resources must be rewritten.
type Service struct {
	Name   string
	Kind   Kind
	Config string
}

// Address is a pod address and the gateway services it belongs to (sorted).
type Address struct {
	IP       string
	Services []string
}

// Location is a node address and, for a partial update, only the addresses that change. An
// address with no services in a partial location removes that address. Full replaces all the
// location's addresses; a partial location with no addresses removes the whole location.
type Location struct {
	Node      string
	Full      bool
	Addresses []Address
}

// LocationsUpdate is one updateAddressLocations request.
type LocationsUpdate struct {
	// Full replaces every location of the gateway (the locations not listed disappear).
	Full      bool
	Locations []Location
}

// Empty reports whether the update would change nothing.
func (u LocationsUpdate) Empty() bool { return !u.Full && len(u.Locations) == 0 }

// Addresses counts the addresses in the update (for metrics).
func (u LocationsUpdate) Addresses() int {
	n := 0
	for _, l := range u.Locations {
		n += len(l.Addresses)
	}
	return n
}

type set = map[string]struct{}

// locations is node → pod address → services.
type locations map[string]map[string]set

// Tracker holds both sides. The zero value is not usable; call New.
type Tracker struct {
	mu sync.Mutex
	// Cluster side.
	services map[string]Service
	members  map[string]map[string]string // service → pod address → node address
	// Azure side.
	applied     map[string]Service
	appliedLocs locations
	// needFull asks for a full locations update (the applied side is not trusted).
	needFull bool
}

// New returns an empty tracker.
func New() *Tracker {
	return &Tracker{services: map[string]Service{}, members: map[string]map[string]string{},
		applied: map[string]Service{}, appliedLocs: locations{}}
}

// Canonical returns the canonical text of an IP address ("" if it is not one), so that one
// address never appears twice in a request under two spellings.
func Canonical(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ""
	}
	return a.Unmap().String()
}

// SetService adds or changes a desired service.
func (t *Tracker) SetService(s Service) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.services[s.Name] = s
}

// DeleteService removes a desired service and its members. Its addresses are withdrawn from
// the gateway first; the registration goes once no applied address references it.
func (t *Tracker) DeleteService(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.services, name)
	delete(t.members, name)
}

// SetMembers replaces the pod addresses of a service: pod address → node address. Addresses
// that are not IPs are ignored.
func (t *Tracker) SetMembers(service string, members map[string]string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := map[string]string{}
	for pod, node := range members {
		p, n := Canonical(pod), Canonical(node)
		if p != "" && n != "" {
			m[p] = n
		}
	}
	if len(m) == 0 {
		delete(t.members, service)
		return
	}
	t.members[service] = m
}

// Desired returns a copy of the desired services.
func (t *Tracker) Desired() map[string]Service {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.services)
}

// Applied returns a copy of the services registered with the gateway.
func (t *Tracker) Applied() map[string]Service {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.applied)
}

// LoadApplied replaces the Azure side with what was read from Azure (start-up, or after a
// call whose outcome is unknown). locs is node → pod address → services.
func (t *Tracker) LoadApplied(services []Service, locs map[string]map[string][]string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.applied = map[string]Service{}
	for _, s := range services {
		t.applied[s.Name] = s
	}
	t.appliedLocs = locations{}
	for node, addrs := range locs {
		n := Canonical(node)
		if n == "" {
			n = node
		}
		m := map[string]set{}
		for ip, svcs := range addrs {
			p := Canonical(ip)
			if p == "" {
				p = ip
			}
			m[p] = toSet(svcs)
		}
		t.appliedLocs[n] = m
	}
	t.needFull = false
}

// MarkDrift makes the next locations update a full one.
func (t *Tracker) MarkDrift() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.needFull = true
}

// ToRegister lists the desired services that are not registered, or registered with another
// Config, sorted by name.
func (t *Tracker) ToRegister() []Service {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Service
	for name, s := range t.services {
		if a, ok := t.applied[name]; !ok || a != s {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// RecordRegistered records services registered with the gateway (resources in place).
func (t *Tracker) RecordRegistered(ss ...Service) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range ss {
		t.applied[s.Name] = s
	}
}

// ToRemove lists the registered services that are no longer desired and that no applied
// address references any more (so they can be unregistered and their resources deleted).
func (t *Tracker) ToRemove() []Service {
	t.mu.Lock()
	defer t.mu.Unlock()
	referenced := set{}
	for _, addrs := range t.appliedLocs {
		for _, svcs := range addrs {
			for s := range svcs {
				referenced[s] = struct{}{}
			}
		}
	}
	var out []Service
	for name, s := range t.applied {
		if _, want := t.services[name]; want {
			continue
		}
		if _, ref := referenced[name]; !ref {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// RecordRemoved records services unregistered from the gateway.
func (t *Tracker) RecordRemoved(names ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range names {
		delete(t.applied, n)
	}
}

// desiredLocations is the cluster side as node → address → services, keeping only services
// that are desired and already registered (an address must never name a service the gateway
// does not know).
func (t *Tracker) desiredLocations() locations {
	out := locations{}
	for svc, members := range t.members {
		if _, want := t.services[svc]; !want {
			continue
		}
		if _, reg := t.applied[svc]; !reg {
			continue
		}
		for pod, node := range members {
			addrs := out[node]
			if addrs == nil {
				addrs = map[string]set{}
				out[node] = addrs
			}
			if addrs[pod] == nil {
				addrs[pod] = set{}
			}
			addrs[pod][svc] = struct{}{}
		}
	}
	return out
}

// LocationsDiff is the update that brings the gateway's address locations to the cluster
// side: a partial update of only the changed locations and addresses, or a full update after
// MarkDrift.
func (t *Tracker) LocationsDiff() LocationsUpdate {
	t.mu.Lock()
	defer t.mu.Unlock()
	return Diff(t.appliedLocs, t.desiredLocations(), t.needFull)
}

// RecordLocations applies a successful update to the Azure side (the gateway's semantics).
func (t *Tracker) RecordLocations(u LocationsUpdate) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.appliedLocs = applyUpdate(t.appliedLocs, u)
	if u.Full {
		t.needFull = false
	}
}

// InSync reports whether nothing is left to do.
func (t *Tracker) InSync() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.needFull || len(t.services) != len(t.applied) {
		return false
	}
	for n, s := range t.services {
		if t.applied[n] != s {
			return false
		}
	}
	return Diff(t.appliedLocs, t.desiredLocations(), false).Empty()
}

// AppliedLocations returns a copy of the applied locations: node → address → sorted services.
func (t *Tracker) AppliedLocations() map[string]map[string][]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]map[string][]string{}
	for n, addrs := range t.appliedLocs {
		m := map[string][]string{}
		for a, s := range addrs {
			m[a] = sortedSet(s)
		}
		out[n] = m
	}
	return out
}

// Diff computes the update from applied to desired (both node → address → services).
func Diff(applied, desired locations, full bool) LocationsUpdate {
	if full {
		u := LocationsUpdate{Full: true}
		for _, node := range sortedKeys(desired) {
			u.Locations = append(u.Locations, Location{Node: node, Full: true, Addresses: addressesOf(desired[node], sortedKeys(desired[node]))})
		}
		return u
	}
	var u LocationsUpdate
	nodes := set{}
	for n := range applied {
		nodes[n] = struct{}{}
	}
	for n := range desired {
		nodes[n] = struct{}{}
	}
	for _, node := range sortedSet(nodes) {
		want, have := desired[node], applied[node]
		switch {
		case len(want) == 0 && have == nil:
		case len(want) == 0:
			u.Locations = append(u.Locations, Location{Node: node}) // drop the location
		case have == nil:
			u.Locations = append(u.Locations, Location{Node: node, Full: true, Addresses: addressesOf(want, sortedKeys(want))})
		default:
			var changed []Address
			ips := set{}
			for a := range want {
				ips[a] = struct{}{}
			}
			for a := range have {
				ips[a] = struct{}{}
			}
			for _, a := range sortedSet(ips) {
				if !maps.Equal(want[a], have[a]) || (want[a] == nil) != (have[a] == nil) {
					changed = append(changed, Address{IP: a, Services: sortedSet(want[a])})
				}
			}
			if len(changed) == 0 {
				continue
			}
			// Every address changes: replace the location instead of listing removals.
			if len(changed) >= len(want)+len(have) {
				u.Locations = append(u.Locations, Location{Node: node, Full: true, Addresses: addressesOf(want, sortedKeys(want))})
				continue
			}
			u.Locations = append(u.Locations, Location{Node: node, Addresses: changed})
		}
	}
	return u
}

// applyUpdate returns applied after the gateway processed u (applied is not modified).
func applyUpdate(applied locations, u LocationsUpdate) locations {
	out := locations{}
	if !u.Full {
		for n, addrs := range applied {
			m := map[string]set{}
			for a, s := range addrs {
				m[a] = maps.Clone(s)
			}
			out[n] = m
		}
	}
	for _, l := range u.Locations {
		if !u.Full && !l.Full && len(l.Addresses) == 0 {
			delete(out, l.Node)
			continue
		}
		m := out[l.Node]
		if m == nil || u.Full || l.Full {
			m = map[string]set{}
		}
		for _, a := range l.Addresses {
			if !u.Full && !l.Full && len(a.Services) == 0 {
				delete(m, a.IP)
				continue
			}
			m[a.IP] = toSet(a.Services)
		}
		out[l.Node] = m
	}
	return out
}

func addressesOf(m map[string]set, keys []string) []Address {
	out := make([]Address, 0, len(keys))
	for _, k := range keys {
		out = append(out, Address{IP: k, Services: sortedSet(m[k])})
	}
	return out
}

func toSet(ss []string) set {
	out := set{}
	for _, s := range ss {
		out[s] = struct{}{}
	}
	return out
}

func sortedSet(s set) []string {
	out := make([]string, 0, len(s))
	for k := range s {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
