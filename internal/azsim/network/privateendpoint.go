package network

import (
	"crypto/sha256"
	"encoding/binary"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// peLinkKey holds a private endpoint's emulator-private state (never sent to
// clients): the service it connects to, the connection's name on that
// service, and its network interface's ip configuration and address.
const peLinkKey = arm.PrivatePrefix + "PrivateLink"

// peLink is the private state of a private endpoint.
type peLink struct {
	Service     string // canonical private link service ID
	Connection  string // name of the connection in the service's privateEndpointConnections ("" once removed)
	Manual      bool
	NIC         string // network interface ID
	NICIPConfig string // name of the interface's ip configuration
	Subnet      string
	PrivateIP   string
	Static      bool
}

func linkOf(doc map[string]any) (peLink, bool) {
	m, ok := doc[peLinkKey].(map[string]any)
	if !ok {
		return peLink{}, false
	}
	s := func(k string) string { v, _ := m[k].(string); return v }
	b := func(k string) bool { v, _ := m[k].(bool); return v }
	return peLink{Service: s("service"), Connection: s("connection"), Manual: b("manual"), NIC: s("nic"),
		NICIPConfig: s("nicIPConfig"), Subnet: s("subnet"), PrivateIP: s("privateIPAddress"), Static: b("static")}, true
}

func (l peLink) doc() map[string]any {
	return map[string]any{"service": l.Service, "connection": l.Connection, "manual": l.Manual, "nic": l.NIC,
		"nicIPConfig": l.NICIPConfig, "subnet": l.Subnet, "privateIPAddress": l.PrivateIP, "static": l.Static}
}

// resolveService finds the private link service a connection names by
// resource ID or by alias.
func resolveService(tx *arm.Tx, pe, ref string) (map[string]any, error) {
	ref = strings.TrimSpace(ref)
	if strings.HasPrefix(ref, "/") {
		rid, err := arm.ParseID(ref)
		if err != nil || rid.IsCollection() || !strings.EqualFold(rid.FullType(), plsType) {
			return nil, errInvalidServiceID(pe, ref)
		}
		doc, ok := tx.Get(ref)
		if !ok || strings.EqualFold(arm.Str(doc, "properties", "provisioningState"), "Deleting") {
			return nil, errNotVisible(ref)
		}
		return doc, nil
	}
	if !strings.HasSuffix(strings.ToLower(ref), ".azure.privatelinkservice") {
		return nil, errInvalidServiceID(pe, ref)
	}
	for _, pls := range tx.List(plsType, "") {
		if strings.EqualFold(arm.Str(pls, "properties", "alias"), ref) &&
			!strings.EqualFold(arm.Str(pls, "properties", "provisioningState"), "Deleting") {
			return pls, nil
		}
	}
	return nil, errNotVisible(ref)
}

func connectionState(status, description string) map[string]any {
	return map[string]any{"status": status, "description": description, "actionsRequired": "None"}
}

// linkIdentifier is the numeric consumer link ID NRP shows on a connection.
func linkIdentifier(seed string) string {
	sum := sha256.Sum256([]byte(seed))
	return strconv.FormatUint(uint64(binary.BigEndian.Uint32(sum[:4])>>1), 10)
}

func preparePrivateEndpoint(tx *arm.Tx, w *arm.Write) error {
	var old peLink
	hadLink := false
	if w.Old != nil {
		old, hadLink = linkOf(w.Old)
	}
	if err := normalize(w, &armnetwork.PrivateEndpoint{}); err != nil {
		return err
	}
	d, p := w.Doc, arm.Props(w.Doc)
	id := w.ID.String()
	delete(p, "networkInterfaces")
	delete(p, "provisioningState")

	subnet := refID(p, "subnet")
	if subnet == "" {
		return arm.BadRequest("InvalidRequestFormat", "Cannot parse the request: private endpoint %s needs properties.subnet.id.", id)
	}
	sn, ok := tx.GetChild(subnet)
	if !ok || !strings.EqualFold(arm.Str(sn, "type"), ns+"virtualNetworks/subnets") {
		return arm.InvalidReference(subnet, id)
	}
	subnet = arm.Str(sn, "id")
	p["subnet"] = map[string]any{"id": subnet}

	auto, manual := childItems(d, "privateLinkServiceConnections"), childItems(d, "manualPrivateLinkServiceConnections")
	if len(auto)+len(manual) != 1 {
		return errEndpointConnectionCount(id, len(auto)+len(manual))
	}
	isManual := len(manual) == 1
	conn := append(auto, manual...)[0]
	if arm.Str(conn, "name") == "" {
		conn["name"] = w.ID.Name()
	}
	cp := arm.Props(conn)
	ref := arm.Str(cp, "privateLinkServiceId")
	pls, err := resolveService(tx, id, ref)
	if err != nil {
		return err
	}
	plsID, plsProps := arm.Str(pls, "id"), arm.Props(pls)

	// The connection keeps its state while the endpoint goes on naming the
	// same service the same way; otherwise it is a new request.
	link := peLink{Service: plsID, Manual: isManual}
	var state map[string]any
	newEntry := false
	if hadLink && arm.SameID(old.Service, plsID) && old.Manual == isManual {
		link.Connection = old.Connection
		if i := arm.FindByName(childItems(pls, "privateEndpointConnections"), old.Connection); old.Connection != "" && i >= 0 {
			state = arm.CopyDoc(arm.Obj(arm.Props(childItems(pls, "privateEndpointConnections")[i]), true, "privateLinkServiceConnectionState"))
		} else {
			link.Connection = ""
			state = connectionState(StateDisconnected, descRemoved)
		}
	} else {
		plsRID := arm.MustParseID(plsID)
		switch DecideConnection(ConnectionRequest{ServiceSubscription: plsRID.Subscription, EndpointSubscription: w.ID.Subscription,
			Visibility: subscriptionsOf(plsProps, "visibility"), AutoApproval: subscriptionsOf(plsProps, "autoApproval"), Manual: isManual}) {
		case OutcomeNotVisible:
			return errNotVisible(ref)
		case OutcomeNoApprovalRight:
			return errLinkedAuthorization(id, plsID)
		case OutcomePending:
			state = connectionState(StatePending, descAwaitingApproval)
		default:
			state = connectionState(StateApproved, descAutoApproved)
		}
		link.Connection = w.ID.Name() + "." + arm.NewGUID()
		newEntry = true
	}
	cp["privateLinkServiceConnectionState"] = state
	defaults(cp, "groupIds", []any{})
	if isManual {
		p["privateLinkServiceConnections"], p["manualPrivateLinkServiceConnections"] = []any{}, []any{conn}
	} else {
		p["privateLinkServiceConnections"], p["manualPrivateLinkServiceConnections"] = []any{conn}, []any{}
	}

	// The network interface NRP creates (named by the client or <name>.nic.<guid>).
	custom := arm.Str(p, "customNetworkInterfaceName")
	switch {
	case hadLink:
		link.NIC, link.NICIPConfig = old.NIC, old.NICIPConfig
		if custom != "" && !strings.EqualFold(custom, arm.MustParseID(old.NIC).Name()) {
			return errCustomNICChange(id, arm.MustParseID(old.NIC).Name(), custom)
		}
	case custom != "":
		link.NIC = arm.ResourceID{Subscription: w.ID.Subscription, ResourceGroup: w.ID.ResourceGroup, Namespace: "Microsoft.Network",
			Types: []string{"networkInterfaces"}, Names: []string{custom}}.String()
		if tx.Exists(link.NIC) {
			return errCustomNICExists(id, custom)
		}
		link.NICIPConfig = "privateEndpointIpConfig." + arm.NewGUID()
	default:
		link.NIC = managedNICID(w.ID, arm.NewGUID())
		link.NICIPConfig = "privateEndpointIpConfig." + arm.NewGUID()
	}

	// One address from the endpoint's subnet: dynamic, or the static address
	// of its single ipConfigurations entry.
	ipcs := childItems(d, "ipConfigurations")
	if len(ipcs) > 1 {
		return arm.BadRequest("InvalidNumberOfPrivateEndpointIpConfigurations",
			"Private endpoint %s has %d ipConfigurations; a connection to a private link service takes one address.", id, len(ipcs))
	}
	want := ""
	if len(ipcs) == 1 {
		want = arm.Str(ipcs[0], "properties", "privateIPAddress")
	}
	owner := link.NIC + "/ipConfigurations/" + link.NICIPConfig
	if hadLink && !arm.SameID(old.Subnet, subnet) {
		ReleasePrivateIP(tx, old.Subnet, owner)
	}
	ip, err := AllocatePrivateIPVersion(tx, subnet, owner, want, IPv4)
	if err != nil {
		return err
	}
	link.Subnet, link.PrivateIP, link.Static = subnet, ip, want != ""
	p["networkInterfaces"] = arm.Refs([]string{link.NIC})
	defaults(p, "customDnsConfigs", []any{}, "applicationSecurityGroups", []any{}, "ipConfigurations", []any{})
	d[peLinkKey] = link.doc()

	// The service side, last: drop a connection the endpoint left, add the new one.
	if newEntry {
		if hadLink && old.Connection != "" {
			removeConnection(tx, old.Service, old.Connection)
		}
		entry := map[string]any{"name": link.Connection, "properties": map[string]any{
			"privateEndpoint":                   map[string]any{"id": id},
			"privateLinkServiceConnectionState": arm.CopyDoc(state),
			"linkIdentifier":                    linkIdentifier(id + link.Connection),
			"privateEndpointLocation":           normLocation(arm.Str(d, "location")),
		}}
		tx.Modify(plsID, func(doc map[string]any) {
			arm.SetArr(doc, append(childItems(doc, "privateEndpointConnections"), entry), "properties", "privateEndpointConnections")
		})
	}
	return nil
}

// removeConnection deletes a connection from a private link service (when
// its endpoint goes away or connects elsewhere).
func removeConnection(tx *arm.Tx, service, name string) {
	doc, ok := tx.Get(service)
	if !ok {
		return
	}
	items := childItems(doc, "privateEndpointConnections")
	i := arm.FindByName(items, name)
	if i < 0 {
		return
	}
	tx.Modify(service, func(doc map[string]any) {
		items := childItems(doc, "privateEndpointConnections")
		arm.SetArr(doc, append(items[:i:i], items[i+1:]...), "properties", "privateEndpointConnections")
	})
}

func afterDeletePrivateEndpoint(tx *arm.Tx, id arm.ResourceID, doc map[string]any) {
	if l, ok := linkOf(doc); ok && l.Connection != "" {
		removeConnection(tx, l.Service, l.Connection)
	}
	afterDeleteOwnerOfNICs(tx, id, doc)
}
