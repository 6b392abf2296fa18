package compute

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestProviderDocument(t *testing.T) {
	p := ProviderDocument("sub", "Microsoft.Compute", []ResourceType{{"virtualMachines", []string{"2025-04-01"}}, {"disks", nil}}, DefaultLocations())
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	for _, want := range []string{
		`"namespace":"Microsoft.Compute"`,
		`"resourceType":"virtualMachines"`,
		`"locations":["East US","West US"]`,
		`"zoneMappings":[{"location":"East US","zones":["1","2","3"]}]`,
		`"registrationState":"Registered"`,
		`"apiVersions":["2025-04-01"]`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("provider document lacks %s: %s", want, s)
		}
	}
	if len(p.ResourceTypes) != 2 {
		t.Errorf("resource types: %d", len(p.ResourceTypes))
	}
	noZones := ProviderDocument("sub", "Microsoft.Network", []ResourceType{{Name: "loadBalancers"}}, []Location{{Name: "westus"}})
	if zm := noZones.ResourceTypes[0].ZoneMappings; zm == nil || len(zm) != 0 {
		t.Errorf("non-zonal region must give an empty zoneMappings list, got %v", zm)
	}
}

func TestFindLocation(t *testing.T) {
	locs := DefaultLocations()
	for _, in := range []string{"eastus", "East US", "EASTUS"} {
		if l, ok := FindLocation(locs, in); !ok || l.Name != "eastus" {
			t.Errorf("FindLocation(%q) = %v,%v", in, l, ok)
		}
	}
	if _, ok := FindLocation(locs, "northpole"); ok {
		t.Error("unknown location found")
	}
}

func TestParseVMListFilter(t *testing.T) {
	id := "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/flex"
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{"", "", false},
		{"'virtualMachineScaleSet/id' eq '" + id + "'", id, false},
		{"virtualMachineScaleSet/id eq '" + id + "'", id, false},
		{"'VirtualMachineScaleSet/ID'  EQ  '" + id + "'", id, false},
		{"name eq 'x'", "", true},
	}
	for _, tt := range tests {
		f, err := ParseVMListFilter(tt.in)
		if (err != nil) != tt.wantErr || f.ScaleSetID != tt.want {
			t.Errorf("ParseVMListFilter(%q) = %+v, %v", tt.in, f, err)
		}
	}
	f := ListFilter{ScaleSetID: id}
	if !f.Match(strings.ToLower(id)) || f.Match(id+"2") || f.Match("") {
		t.Error("filter matching")
	}
	if !(ListFilter{}).Match("") {
		t.Error("empty filter must match everything")
	}
}
