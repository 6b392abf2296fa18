package compute

import (
	"reflect"
	"testing"
)

func TestPlanCapacity(t *testing.T) {
	z3 := []string{"1", "2", "3"}
	tests := []struct {
		name     string
		members  []Member
		capacity int
		nextID   int
		zones    []string
		fds      int
		want     ScalePlan
	}{
		{
			name: "empty zonal set round-robins zones", capacity: 5, zones: z3, fds: 1,
			want: ScalePlan{NextID: 5, Create: []Placement{
				{0, "1", 0}, {1, "2", 0}, {2, "3", 0}, {3, "1", 0}, {4, "2", 0},
			}},
		},
		{
			name: "regional set spreads fault domains", capacity: 3, fds: 2,
			want: ScalePlan{NextID: 3, Create: []Placement{{0, "", 0}, {1, "", 1}, {2, "", 0}}},
		},
		{
			name:    "scale out fills the emptiest zone and never reuses ids",
			members: []Member{{0, "1"}, {1, "2"}, {3, "1"}}, nextID: 5, capacity: 5, zones: z3, fds: 1,
			want: ScalePlan{NextID: 7, Create: []Placement{{5, "3", 0}, {6, "2", 0}}},
		},
		{
			name:    "next id is at least past the highest member",
			members: []Member{{7, ""}}, nextID: 2, capacity: 2, fds: 5,
			want: ScalePlan{NextID: 9, Create: []Placement{{8, "", 3}}},
		},
		{
			name:    "scale in deletes highest ids first",
			members: []Member{{0, "1"}, {4, "2"}, {2, "3"}, {9, "1"}}, nextID: 10, capacity: 2, zones: z3,
			want: ScalePlan{NextID: 10, Delete: []int{9, 4}},
		},
		{
			name:    "steady state does nothing",
			members: []Member{{0, ""}, {1, ""}}, nextID: 2, capacity: 2,
			want: ScalePlan{NextID: 2},
		},
		{
			name:    "negative capacity deletes everything",
			members: []Member{{0, ""}}, nextID: 1, capacity: -1,
			want: ScalePlan{NextID: 1, Delete: []int{0}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PlanCapacity(tt.members, tt.capacity, tt.nextID, tt.zones, tt.fds)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestDomains(t *testing.T) {
	if DefaultFaultDomains(true) != 1 || DefaultFaultDomains(false) != 5 {
		t.Error("default fault domain counts")
	}
	if FaultDomain(7, 0) != 0 || FaultDomain(7, 3) != 1 || UpdateDomain(12) != 2 {
		t.Error("domain arithmetic")
	}
}
