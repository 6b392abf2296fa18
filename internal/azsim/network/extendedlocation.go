package network

import (
	"strings"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// Edge zones: load balancers and public IPs may carry extendedLocation {name, type: EdgeZone}.
// It is fixed at creation, an edge-zone resource has no availability zones (NRP refuses zones
// with an extended location), and a load balancer frontend references only public IPs of its
// own extended location. Error codes other than ResourceMayNotReferenceCrossLocationResource
// are azsim's: the reference material names none.

// extendedLocation returns the lower-cased edge zone name of a document ("" when none).
func extendedLocation(doc map[string]any) string {
	return strings.ToLower(arm.Str(doc, "extendedLocation", "name"))
}

// checkExtendedLocation validates a load balancer or public IP write: a well-formed
// extendedLocation, unchanged since creation, and no zones with it.
func checkExtendedLocation(w *arm.Write) error {
	el := arm.Obj(w.Doc, false, "extendedLocation")
	if el != nil {
		if arm.Str(el, "name") == "" {
			return arm.BadRequest("InvalidRequestFormat", "Cannot parse the request: extendedLocation of %s has no name.", w.ID)
		}
		if t := arm.Str(el, "type"); !strings.EqualFold(t, "EdgeZone") {
			return arm.BadRequest("InvalidRequestFormat", "Cannot parse the request: extendedLocation type '%s' of %s is not EdgeZone.", t, w.ID)
		}
		el["type"] = "EdgeZone"
		if len(stringsAt(w.Doc, "zones")) > 0 {
			return arm.BadRequest("ZonesNotSupportedInExtendedLocation",
				"Resource %s in extended location %s cannot have availability zones.", w.ID, arm.Str(el, "name"))
		}
		for _, fe := range childItems(w.Doc, "frontendIPConfigurations") {
			if len(stringsAt(fe, "zones")) > 0 {
				return arm.BadRequest("ZonesNotSupportedInExtendedLocation",
					"Frontend IP configuration %s of load balancer %s in extended location %s cannot have availability zones.",
					arm.Str(fe, "name"), w.ID, arm.Str(el, "name"))
			}
		}
	}
	if w.Old != nil && extendedLocation(w.Old) != extendedLocation(w.Doc) {
		return arm.BadRequest("ExtendedLocationCannotBeChanged",
			"The extended location of %s cannot be changed from '%s' to '%s'.", w.ID, arm.Str(w.Old, "extendedLocation", "name"), arm.Str(w.Doc, "extendedLocation", "name"))
	}
	return nil
}

// checkFrontendExtendedLocation refuses a load balancer frontend that references a public IP of
// another extended location (or one in the region from an edge zone, and the reverse).
func checkFrontendExtendedLocation(lb map[string]any, lbID, frontendID string, pip map[string]any) error {
	if extendedLocation(lb) == extendedLocation(pip) {
		return nil
	}
	where := func(d map[string]any) string {
		if n := arm.Str(d, "extendedLocation", "name"); n != "" {
			return "extended location " + n
		}
		return "location " + arm.Str(d, "location")
	}
	return arm.BadRequest("ResourceMayNotReferenceCrossLocationResource",
		"Resource %s in %s may not reference resource %s in %s.", frontendID, where(lb), arm.Str(pip, "id"), where(pip))
}
