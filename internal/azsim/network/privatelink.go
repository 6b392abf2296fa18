package network

import (
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

const (
	plsType = ns + "privateLinkServices"
	peType  = ns + "privateEndpoints"

	// MaxPrivateLinkServicesPerLoadBalancer is Azure's limit of private link
	// services on the frontends of one Standard load balancer.
	MaxPrivateLinkServicesPerLoadBalancer = 8
	// MaxPrivateLinkServiceIPConfigurations is Azure's limit of NAT IP
	// configurations of one private link service.
	MaxPrivateLinkServiceIPConfigurations = 8
)

func privateLinkSpecs() []arm.TypeSpec {
	return []arm.TypeSpec{
		{Type: plsType, APIVersions: arm.NetworkAPIVersions, Prepare: preparePrivateLinkService,
			BeforeDelete: beforeDeletePrivateLinkService, AfterDelete: afterDeleteOwnerOfNICs},
		// The owner approves or rejects with a synchronous PUT (200) and removes with a DELETE LRO.
		{Type: plsType + "/privateEndpointConnections", PutLRO: arm.LRONone},
		{Type: plsType + "/ipConfigurations", NoAPI: true},
		{Type: peType, APIVersions: arm.NetworkAPIVersions, Prepare: preparePrivateEndpoint, AfterDelete: afterDeletePrivateEndpoint},
		{Type: peType + "/privateLinkServiceConnections", NoAPI: true},
		{Type: peType + "/manualPrivateLinkServiceConnections", NoAPI: true},
	}
}

// privateLinkServiceOf returns the private link service whose frontend is fe, if any.
func privateLinkServiceOf(tx *arm.Tx, fe string, except string) string {
	for _, pls := range tx.List(plsType, "") {
		if arm.SameID(arm.Str(pls, "id"), except) {
			continue
		}
		for _, f := range arm.RefIDs(arm.Props(pls), "loadBalancerFrontendIpConfigurations") {
			if arm.SameID(f, fe) {
				return arm.Str(pls, "id")
			}
		}
	}
	return ""
}

// frontendUse is a load balancer frontend that serves a private link service.
type frontendUse struct{ Frontend, Service string }

// privateLinkServicesOfLB maps the lower-cased frontend IDs of a load balancer
// to the private link services that use them.
func privateLinkServicesOfLB(tx *arm.Tx, lbID string) map[string]frontendUse {
	prefix := arm.KeyOf(lbID) + "/frontendipconfigurations/"
	out := map[string]frontendUse{}
	for _, pls := range tx.List(plsType, "") {
		for _, f := range arm.RefIDs(arm.Props(pls), "loadBalancerFrontendIpConfigurations") {
			if strings.HasPrefix(arm.KeyOf(f), prefix) {
				out[arm.KeyOf(f)] = frontendUse{Frontend: f, Service: arm.Str(pls, "id")}
			}
		}
	}
	return out
}

func preparePrivateLinkService(tx *arm.Tx, w *arm.Write) error {
	if w.Child != nil {
		return prepareConnectionWrite(w)
	}
	if err := normalize(w, &armnetwork.PrivateLinkService{}); err != nil {
		return err
	}
	d, p := w.Doc, arm.Props(w.Doc)
	id := w.ID.String()
	for _, k := range []string{"alias", "networkInterfaces", "privateEndpointConnections", "provisioningState"} {
		delete(p, k) // read-only: NRP ignores what clients send
	}
	if ip := arm.Str(p, "destinationIPAddress"); ip != "" {
		return errFeatureNotRegistered(w.ID.Subscription, "destinationIPAddress")
	}

	// The load balancer frontend: exactly one, on a Standard load balancer,
	// serving no other private link service, on at most 8 per load balancer.
	fes := arm.RefIDs(p, "loadBalancerFrontendIpConfigurations")
	if len(fes) != 1 {
		return errFrontendCount(w.ID.Name(), len(fes))
	}
	fe, ok := tx.GetChild(fes[0])
	if !ok || !strings.EqualFold(arm.Str(fe, "type"), ns+"loadBalancers/frontendIPConfigurations") {
		return arm.InvalidReference(fes[0], id)
	}
	feID := arm.Str(fe, "id")
	lbID, _ := parentID(feID)
	lb, _ := tx.Get(lbID)
	if sku := skuNameOr(lb, "Basic"); !strings.EqualFold(sku, "Standard") {
		return errPLSOnNonStandardLB(id, feID, sku)
	}
	if w.Old != nil {
		if old := arm.RefIDs(arm.Props(w.Old), "loadBalancerFrontendIpConfigurations"); len(old) == 1 {
			if oldLB, _ := parentID(old[0]); !arm.SameID(oldLB, lbID) {
				return errChangeLoadBalancer(id, oldLB, lbID)
			}
		}
	}
	if other := privateLinkServiceOf(tx, feID, id); other != "" {
		return errFrontendHasPLS(feID, other)
	}
	onLB := map[string]bool{}
	for _, u := range privateLinkServicesOfLB(tx, lbID) {
		if !arm.SameID(u.Service, id) {
			onLB[arm.KeyOf(u.Service)] = true
		}
	}
	if len(onLB) >= MaxPrivateLinkServicesPerLoadBalancer {
		return errPLSPerLBLimit(lbID, MaxPrivateLinkServicesPerLoadBalancer)
	}
	p["loadBalancerFrontendIpConfigurations"] = arm.Refs([]string{feID})

	// NAT IP configurations: 1..8, one primary, in subnets whose private link
	// service network policies are disabled; addresses dynamic or static.
	ipcs := childItems(d, "ipConfigurations")
	if len(ipcs) == 0 || len(ipcs) > MaxPrivateLinkServiceIPConfigurations {
		return errPLSIPConfigCount(id, len(ipcs), MaxPrivateLinkServiceIPConfigurations)
	}
	primaries := 0
	names := map[string]bool{}
	for _, c := range ipcs {
		n := strings.ToLower(arm.Str(c, "name"))
		if n == "" {
			return arm.BadRequest("InvalidRequestFormat", "Every IP configuration of private link service %s needs a name.", id)
		}
		if names[n] {
			return arm.BadRequest("DuplicateResourceName", "Private link service %s has more than one IP configuration named %s.", id, arm.Str(c, "name"))
		}
		names[n] = true
		if b, _ := arm.Props(c)["primary"].(bool); b {
			primaries++
		}
	}
	if primaries > 1 {
		return errPLSPrimary(id)
	}
	for i, c := range ipcs {
		cp := arm.Props(c)
		switch _, set := cp["primary"]; {
		case primaries == 0:
			cp["primary"] = i == 0 // as for network interfaces: the first one
		case !set:
			cp["primary"] = false
		}
		cid := w.ID.Child("ipConfigurations", arm.Str(c, "name")).String()
		subnet := refID(cp, "subnet")
		if subnet == "" {
			return arm.BadRequest("IpConfigurationSubnetMissing", "IP configuration %s must reference a subnet.", cid)
		}
		sn, ok := tx.GetChild(subnet)
		if !ok {
			return arm.InvalidReference(subnet, cid)
		}
		subnet = arm.Str(sn, "id")
		cp["subnet"] = map[string]any{"id": subnet}
		if !strings.EqualFold(arm.Str(sn, "properties", "privateLinkServiceNetworkPolicies"), "Disabled") {
			return errPLSSubnetPolicies(id, subnet)
		}
		if arm.Str(cp, "privateIPAllocationMethod") == "" {
			cp["privateIPAllocationMethod"] = "Dynamic"
		}
		if arm.Str(cp, "privateIPAddress") == "" && strings.EqualFold(arm.Str(cp, "privateIPAllocationMethod"), "Static") {
			return arm.BadRequest("PrivateIPAddressIsNotSpecified", "IP configuration %s has static allocation but no private IP address.", cid)
		}
		if _, ok := NormalizeIPVersion(arm.Str(cp, "privateIPAddressVersion")); !ok {
			return arm.BadRequest("InvalidRequestFormat", "Cannot parse the request: invalid privateIPAddressVersion '%s' of %s.", arm.Str(cp, "privateIPAddressVersion"), cid)
		}
	}
	// Addresses last, once everything else is valid.
	var keep []string
	for _, c := range ipcs {
		cp := arm.Props(c)
		cid := w.ID.Child("ipConfigurations", arm.Str(c, "name")).String()
		want := ""
		if strings.EqualFold(arm.Str(cp, "privateIPAllocationMethod"), "Static") {
			want = arm.Str(cp, "privateIPAddress")
		}
		version, _ := NormalizeIPVersion(arm.Str(cp, "privateIPAddressVersion"))
		ip, err := AllocatePrivateIPVersion(tx, refID(cp, "subnet"), cid, want, version)
		if err != nil {
			return err
		}
		cp["privateIPAddress"], cp["privateIPAddressVersion"] = ip, version
		keep = append(keep, cid)
	}
	tx.ReleaseIPsExcept(id, keep)

	// Read-only fields: kept for the life of the service.
	alias, nic := "", ""
	conns := []any{}
	if w.Old != nil {
		op := arm.Props(w.Old)
		alias = arm.Str(op, "alias")
		nic = first(arm.RefIDs(op, "networkInterfaces"))
		if v, ok := op["privateEndpointConnections"].([]any); ok {
			conns = v
		}
	}
	if alias == "" {
		alias = aliasOf(w.ID.Name(), arm.NewGUID(), arm.Str(d, "location"))
	}
	if nic == "" {
		nic = managedNICID(w.ID, arm.NewGUID())
	}
	p["alias"] = alias
	p["networkInterfaces"] = arm.Refs([]string{nic})
	p["privateEndpointConnections"] = conns
	defaults(p, "fqdns", []any{}, "enableProxyProtocol", false)
	return nil
}

// managedNICID names the network interface NRP creates for a private link
// service or private endpoint: <name>.nic.<guid> in the owner's group.
func managedNICID(owner arm.ResourceID, guid string) string {
	return arm.ResourceID{Subscription: owner.Subscription, ResourceGroup: owner.ResourceGroup, Namespace: "Microsoft.Network",
		Types: []string{"networkInterfaces"}, Names: []string{owner.Name() + ".nic." + guid}}.String()
}

// prepareConnectionWrite handles the owner's PUT (approve / reject) and
// DELETE (remove) of a private endpoint connection. Only the connection
// state is the owner's to change; the rest of the service is untouched.
func prepareConnectionWrite(w *arm.Write) error {
	name := w.Child.Name()
	doc := arm.CopyDoc(w.Old)
	items := childItems(doc, "privateEndpointConnections")
	i := arm.FindByName(items, name)
	if w.Method == http.MethodDelete {
		if i >= 0 {
			items = append(items[:i], items[i+1:]...)
		}
		arm.SetArr(doc, items, "properties", "privateEndpointConnections")
		w.Doc = doc
		return nil
	}
	if i < 0 {
		return arm.NotFoundChild(w.Child.String())
	}
	var body map[string]any
	if j := arm.FindByName(childItems(w.Doc, "privateEndpointConnections"), name); j >= 0 {
		body = childItems(w.Doc, "privateEndpointConnections")[j]
	}
	var req armnetwork.PrivateEndpointConnection
	if err := arm.ToModel(body, &req); err != nil {
		return arm.BadRequest("InvalidRequestFormat", "Cannot parse the request: %v", err)
	}
	cur := arm.Obj(arm.Props(items[i]), true, "privateLinkServiceConnectionState")
	if req.Properties == nil || req.Properties.PrivateLinkServiceConnectionState == nil || req.Properties.PrivateLinkServiceConnectionState.Status == nil {
		return arm.BadRequest("InvalidRequestFormat", "Cannot parse the request: private endpoint connection %s needs properties.privateLinkServiceConnectionState.status.", w.Child)
	}
	st := req.Properties.PrivateLinkServiceConnectionState
	status, ok := ownerStatus(arm.Str(cur, "status"), *st.Status)
	if !ok {
		return errConnectionStatus(w.Child.String(), arm.Str(cur, "status"), *st.Status)
	}
	cur["status"] = status
	if st.Description != nil {
		cur["description"] = *st.Description
	}
	if st.ActionsRequired != nil {
		cur["actionsRequired"] = *st.ActionsRequired
	}
	arm.SetArr(doc, items, "properties", "privateEndpointConnections")
	w.Doc = doc
	return nil
}

func beforeDeletePrivateLinkService(tx *arm.Tx, id arm.ResourceID, doc map[string]any) error {
	if n := len(childItems(doc, "privateEndpointConnections")); n > 0 {
		return errPLSDeleteWithConnections(id.String(), n)
	}
	return nil
}

// afterDeleteOwnerOfNICs deletes the network interfaces NRP made for a
// private link service or private endpoint.
func afterDeleteOwnerOfNICs(tx *arm.Tx, id arm.ResourceID, doc map[string]any) {
	for _, nic := range arm.RefIDs(arm.Props(doc), "networkInterfaces") {
		tx.Delete(nic)
	}
}

// subscriptionsOf returns a ResourceSet's subscription list.
func subscriptionsOf(props map[string]any, key string) []string {
	return stringsAt(props, key, "subscriptions")
}
