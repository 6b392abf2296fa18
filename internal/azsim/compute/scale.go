package compute

import "sort"

// Member is one existing instance of a scale set as the capacity planner sees it.
type Member struct {
	ID   int
	Zone string // "" when the scale set is regional
}

// Placement is where a new instance goes.
type Placement struct {
	ID          int
	Zone        string
	FaultDomain int
}

// ScalePlan is what a change of sku.capacity does to a Uniform scale set.
type ScalePlan struct {
	Create []Placement
	Delete []int // instance ids, highest first
	NextID int   // the id the next created instance will get
}

// PlanCapacity decides which instances to create or delete to reach capacity.
// New instances take fresh increasing ids (Azure never reuses an instance id
// while the scale set exists) and the zone with the fewest members, in the
// scale set's zone order on ties — i.e. round-robin from an empty set.
// Scaling in removes the highest ids first.
func PlanCapacity(members []Member, capacity, nextID int, zones []string, faultDomains int) ScalePlan {
	plan := ScalePlan{NextID: nextID}
	for _, m := range members {
		if m.ID >= plan.NextID {
			plan.NextID = m.ID + 1
		}
	}
	if capacity < 0 {
		capacity = 0
	}
	if len(members) > capacity {
		ids := make([]int, 0, len(members))
		for _, m := range members {
			ids = append(ids, m.ID)
		}
		sort.Sort(sort.Reverse(sort.IntSlice(ids)))
		plan.Delete = ids[:len(members)-capacity]
		return plan
	}
	load := make(map[string]int, len(zones))
	for _, m := range members {
		load[m.Zone]++
	}
	for i := len(members); i < capacity; i++ {
		zone := leastLoadedZone(zones, load)
		load[zone]++
		plan.Create = append(plan.Create, Placement{
			ID:          plan.NextID,
			Zone:        zone,
			FaultDomain: FaultDomain(plan.NextID, faultDomains),
		})
		plan.NextID++
	}
	return plan
}

func leastLoadedZone(zones []string, load map[string]int) string {
	best := ""
	for i, z := range zones {
		if i == 0 || load[z] < load[best] {
			best = z
		}
	}
	return best
}

// DefaultFaultDomains is the platform fault domain count of a scale set that
// does not set one: zonal sets spread over zones instead (1), regional ones
// over 5 fault domains.
func DefaultFaultDomains(zonal bool) int {
	if zonal {
		return 1
	}
	return 5
}

// FaultDomain spreads instances over count fault domains by id.
func FaultDomain(id, count int) int {
	if count <= 1 {
		return 0
	}
	return id % count
}

// updateDomains is the platform update domain count Azure uses by default.
const updateDomains = 5

// UpdateDomain spreads instances over the default 5 update domains by id.
func UpdateDomain(id int) int { return id % updateDomains }
