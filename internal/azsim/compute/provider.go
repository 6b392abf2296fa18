package compute

import (
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v3"
)

// Location is one region the emulator offers, with its availability zones
// (none for a non-zonal region).
type Location struct {
	Name        string   // e.g. "eastus"
	DisplayName string   // e.g. "East US"; what ARM puts in provider documents
	Zones       []string // e.g. ["1","2","3"]
}

// DefaultLocations: eastus with zones 1-3 and westus without zones.
func DefaultLocations() []Location {
	return []Location{
		{Name: "eastus", DisplayName: "East US", Zones: []string{"1", "2", "3"}},
		{Name: "westus", DisplayName: "West US"},
	}
}

func (l Location) display() string {
	if l.DisplayName != "" {
		return l.DisplayName
	}
	return l.Name
}

// ResourceType is one entry of a provider document.
type ResourceType struct {
	Name        string // e.g. "virtualMachines"
	APIVersions []string
}

// ProviderDocument renders GET /subscriptions/{sub}/providers/{namespace}: the
// resource types with their locations and, for zonal regions, zoneMappings.
// The CCM's zone client reads zoneMappings of each resource type.
func ProviderDocument(subscription, namespace string, types []ResourceType, locs []Location) *armresources.Provider {
	p := &armresources.Provider{
		ID:                to.Ptr("/subscriptions/" + subscription + "/providers/" + namespace),
		Namespace:         to.Ptr(namespace),
		RegistrationState: to.Ptr("Registered"),
	}
	for _, t := range types {
		rt := &armresources.ProviderResourceType{ResourceType: to.Ptr(t.Name)}
		for _, v := range t.APIVersions {
			rt.APIVersions = append(rt.APIVersions, to.Ptr(v))
		}
		for _, l := range locs {
			rt.Locations = append(rt.Locations, to.Ptr(l.display()))
			if len(l.Zones) == 0 {
				continue
			}
			zm := &armresources.ZoneMapping{Location: to.Ptr(l.display())}
			for _, z := range l.Zones {
				zm.Zones = append(zm.Zones, to.Ptr(z))
			}
			rt.ZoneMappings = append(rt.ZoneMappings, zm)
		}
		if rt.ZoneMappings == nil {
			rt.ZoneMappings = []*armresources.ZoneMapping{}
		}
		p.ResourceTypes = append(p.ResourceTypes, rt)
	}
	return p
}

// FindLocation returns the configured location matching an ARM location
// string ("eastus", "East US", "EASTUS" all match).
func FindLocation(locs []Location, loc string) (Location, bool) {
	norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, " ", "")) }
	for _, l := range locs {
		if norm(l.Name) == norm(loc) || norm(l.display()) == norm(loc) {
			return l, true
		}
	}
	return Location{}, false
}
