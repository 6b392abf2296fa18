package network

import (
	"encoding/json"
	"strings"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// derivePrivateLink keeps what private link services and private endpoints
// imply elsewhere: the network interfaces NRP creates for them, the endpoint
// side's view of each connection's state, the load balancer frontends'
// privateLinkService reference and the subnets' privateEndpoints. It runs
// before derive so that subnets list the new interfaces' ip configurations
// in the same transaction.
func derivePrivateLink(tx *arm.Tx, changed []string) {
	var pls, pe, vnet bool
	for _, k := range changed {
		switch {
		case strings.Contains(k, "/providers/microsoft.network/privatelinkservices/"):
			pls = true
		case strings.Contains(k, "/providers/microsoft.network/privateendpoints/"):
			pe = true
		case strings.Contains(k, "/providers/microsoft.network/virtualnetworks/"):
			vnet = true
		}
	}
	if pls || pe {
		syncManagedNICs(tx)
		mirrorConnectionStates(tx)
	}
	if pls {
		syncFrontendReferences(tx)
	}
	if pe || vnet {
		syncSubnetEndpoints(tx)
	}
}

// managedIPConfig is one ip configuration of a managed network interface.
type managedIPConfig struct {
	Name, Subnet, IP, Method, Version string
	Primary                           bool
	Fqdns                             []string `json:",omitempty"`
	endpoint                          bool
}

func (c managedIPConfig) doc() map[string]any {
	p := map[string]any{"subnet": map[string]any{"id": c.Subnet}, "privateIPAddress": c.IP,
		"privateIPAllocationMethod": c.Method, "privateIPAddressVersion": c.Version, "primary": c.Primary}
	if c.endpoint {
		fq := make([]any, len(c.Fqdns))
		for i, f := range c.Fqdns {
			fq[i] = f
		}
		p["privateLinkConnectionProperties"] = map[string]any{"groupId": "", "requiredMemberName": "", "fqdns": fq}
	}
	return map[string]any{"name": c.Name, "properties": p}
}

// managedNIC is the interface NRP keeps for a private link service or endpoint.
type managedNIC struct {
	ID, Location string
	OwnerKey     string // "privateLinkService" or "privateEndpoint"
	Owner        string
	IPConfigs    []managedIPConfig
}

func (n managedNIC) signature() string {
	b, _ := json.Marshal(n.IPConfigs)
	return n.Owner + string(b)
}

func signatureOf(nic map[string]any) string {
	var cs []managedIPConfig
	for _, c := range childItems(nic, "ipConfigurations") {
		p := arm.Props(c)
		mc := managedIPConfig{Name: arm.Str(c, "name"), Subnet: refID(p, "subnet"), IP: arm.Str(p, "privateIPAddress"),
			Method: arm.Str(p, "privateIPAllocationMethod"), Version: arm.Str(p, "privateIPAddressVersion")}
		mc.Primary, _ = p["primary"].(bool)
		mc.Fqdns = stringsAt(p, "privateLinkConnectionProperties", "fqdns")
		cs = append(cs, mc)
	}
	b, _ := json.Marshal(cs)
	owner := refID(arm.Props(nic), "privateLinkService")
	if owner == "" {
		owner = refID(arm.Props(nic), "privateEndpoint")
	}
	return owner + string(b)
}

func (n managedNIC) ipConfigurations() []any {
	out := make([]any, len(n.IPConfigs))
	for i, c := range n.IPConfigs {
		out[i] = c.doc()
	}
	return out
}

// wantedNICs lists the interfaces the private link services and endpoints need.
func wantedNICs(tx *arm.Tx) []managedNIC {
	var out []managedNIC
	fqdns := map[string][]string{}
	for _, pls := range tx.List(plsType, "") {
		p := arm.Props(pls)
		fqdns[arm.KeyOf(arm.Str(pls, "id"))] = stringsAt(p, "fqdns")
		nic := first(arm.RefIDs(p, "networkInterfaces"))
		if nic == "" {
			continue
		}
		n := managedNIC{ID: nic, Location: arm.Str(pls, "location"), OwnerKey: "privateLinkService", Owner: arm.Str(pls, "id")}
		for _, c := range childItems(pls, "ipConfigurations") {
			cp := arm.Props(c)
			primary, _ := cp["primary"].(bool)
			n.IPConfigs = append(n.IPConfigs, managedIPConfig{Name: arm.Str(c, "name"), Subnet: refID(cp, "subnet"),
				IP: arm.Str(cp, "privateIPAddress"), Method: arm.Str(cp, "privateIPAllocationMethod"),
				Version: arm.Str(cp, "privateIPAddressVersion"), Primary: primary})
		}
		out = append(out, n)
	}
	for _, pe := range tx.List(peType, "") {
		l, ok := linkOf(pe)
		if !ok || l.NIC == "" {
			continue
		}
		method := "Dynamic"
		if l.Static {
			method = "Static"
		}
		out = append(out, managedNIC{ID: l.NIC, Location: arm.Str(pe, "location"), OwnerKey: "privateEndpoint", Owner: arm.Str(pe, "id"),
			IPConfigs: []managedIPConfig{{Name: l.NICIPConfig, Subnet: l.Subnet, IP: l.PrivateIP, Method: method, Version: IPv4,
				Primary: true, Fqdns: fqdns[arm.KeyOf(l.Service)], endpoint: true}}})
	}
	return out
}

// syncManagedNICs creates, updates and deletes the interfaces NRP manages.
func syncManagedNICs(tx *arm.Tx) {
	wanted := map[string]bool{}
	for _, n := range wantedNICs(tx) {
		wanted[arm.KeyOf(n.ID)] = true
		cur, ok := tx.Get(n.ID)
		if !ok {
			id := arm.MustParseID(n.ID)
			doc := map[string]any{"location": n.Location, "properties": map[string]any{
				n.OwnerKey: map[string]any{"id": n.Owner}, "ipConfigurations": n.ipConfigurations(),
				"resourceGuid": arm.NewGUID(), "macAddress": macAddressOf(n.ID),
			}}
			nicDefaults(doc, id.Scope())
			_ = tx.Create(n.ID, doc)
			continue
		}
		if signatureOf(cur) != n.signature() {
			tx.Modify(n.ID, func(doc map[string]any) { arm.Props(doc)["ipConfigurations"] = n.ipConfigurations() })
		}
	}
	for _, nic := range tx.List(ns+"networkInterfaces", "") {
		p := arm.Props(nic)
		if refID(p, "privateLinkService") == "" && refID(p, "privateEndpoint") == "" {
			continue
		}
		if !wanted[arm.KeyOf(arm.Str(nic, "id"))] {
			tx.Delete(arm.Str(nic, "id"))
		}
	}
}

// mirrorConnectionStates shows, on each endpoint, the state of its
// connection as the service holds it (Disconnected once the owner removed it
// or the service is gone).
func mirrorConnectionStates(tx *arm.Tx) {
	for _, pe := range tx.List(peType, "") {
		l, ok := linkOf(pe)
		if !ok {
			continue
		}
		want := connectionState(StateDisconnected, descRemoved)
		if pls, ok := tx.Get(l.Service); ok && l.Connection != "" {
			items := childItems(pls, "privateEndpointConnections")
			if i := arm.FindByName(items, l.Connection); i >= 0 {
				want = arm.CopyDoc(arm.Obj(arm.Props(items[i]), true, "privateLinkServiceConnectionState"))
			}
		}
		field := "privateLinkServiceConnections"
		if l.Manual {
			field = "manualPrivateLinkServiceConnections"
		}
		conns := childItems(pe, field)
		if len(conns) == 0 || jsonEqual(arm.Obj(arm.Props(conns[0]), false, "privateLinkServiceConnectionState"), want) {
			continue
		}
		tx.Modify(arm.Str(pe, "id"), func(doc map[string]any) {
			if cs := childItems(doc, field); len(cs) > 0 {
				arm.Props(cs[0])["privateLinkServiceConnectionState"] = want
			}
		})
	}
}

// syncFrontendReferences sets each load balancer frontend's read-only
// privateLinkService reference (so the load balancer's etag moves when a
// private link service comes or goes, as NRP's does).
func syncFrontendReferences(tx *arm.Tx) {
	byFE := map[string]string{}
	for _, pls := range tx.List(plsType, "") {
		for _, f := range arm.RefIDs(arm.Props(pls), "loadBalancerFrontendIpConfigurations") {
			byFE[arm.KeyOf(f)] = arm.Str(pls, "id")
		}
	}
	for _, lb := range tx.List(ns+"loadBalancers", "") {
		differs := false
		for _, fe := range childItems(lb, "frontendIPConfigurations") {
			differs = differs || refID(arm.Props(fe), "privateLinkService") != byFE[arm.KeyOf(arm.Str(fe, "id"))]
		}
		if differs {
			tx.Modify(arm.Str(lb, "id"), func(doc map[string]any) {
				for _, fe := range childItems(doc, "frontendIPConfigurations") {
					setRef(arm.Props(fe), "privateLinkService", byFE[arm.KeyOf(arm.Str(fe, "id"))])
				}
			})
		}
	}
}

// syncSubnetEndpoints sets the subnets' read-only privateEndpoints.
func syncSubnetEndpoints(tx *arm.Tx) {
	bySubnet := index{}
	for _, pe := range tx.List(peType, "") {
		bySubnet.add(refID(arm.Props(pe), "subnet"), arm.Str(pe, "id"))
	}
	for _, vnet := range tx.List(ns+"virtualNetworks", "") {
		differs := false
		for _, sn := range childItems(vnet, "subnets") {
			differs = differs || !sameRefs(arm.Props(sn), "privateEndpoints", bySubnet.get(arm.Str(sn, "id")))
		}
		if differs {
			tx.Modify(arm.Str(vnet, "id"), func(doc map[string]any) {
				for _, sn := range childItems(doc, "subnets") {
					setRefs(arm.Props(sn), "privateEndpoints", bySubnet.get(arm.Str(sn, "id")))
				}
			})
		}
	}
}

func jsonEqual(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
