// Package drift makes the edits a third party makes to a cluster's network resources — a
// load balancing rule deleted in the portal, a probe changed by a script, an NSG rule removed
// by a policy, a backend pool member dropped, a frontend pointed at another public IP — the
// way another ARM client would: GET the resource, change it, PUT it back with If-Match, through
// the ARM engine's own handlers. ETags, provisioning states and read-only back-references
// change exactly as for any other write, so the client under test sees ordinary drift.
//
// Edits go to the engine in-process, not through azsim's front door: they are the test's
// doing, so fault rules, latency and the request counters (which measure the client under
// test) do not apply to them.
package drift

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"time"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
)

// Kind is the kind of edit.
type Kind string

// The edits. Resource is the load balancer's ID except for RemoveNSGRule (the NSG's).
const (
	// DeleteRule removes the load balancing rule Name.
	DeleteRule Kind = "delete-rule"
	// ChangeProbe sets the interval of probe Name to IntervalInSeconds (default: 5 more).
	ChangeProbe Kind = "change-probe"
	// RemoveNSGRule removes the security rule Name.
	RemoveNSGRule Kind = "remove-nsg-rule"
	// RemovePoolMember takes member Name out of backend pool Pool: an address entry (by name or
	// IP address) of an IP-based pool, or an ip configuration ID of a NIC-based pool, whose NIC
	// or scale set VM is then written without the pool.
	RemovePoolMember Kind = "remove-pool-member"
	// ChangeFrontendIP points frontend Name at the public IP PublicIP (default: a new Standard
	// public IP "<frontend>-drift" created in the load balancer's resource group).
	ChangeFrontendIP Kind = "change-frontend-ip"
)

// Kinds lists every kind, for help texts and errors.
var Kinds = []Kind{DeleteRule, ChangeProbe, RemoveNSGRule, RemovePoolMember, ChangeFrontendIP}

// Request is one edit.
type Request struct {
	Kind Kind `json:"kind"`
	// Resource is the ID of the load balancer (the NSG for remove-nsg-rule).
	Resource string `json:"resource"`
	// Name is the child edited: rule, probe, NSG rule, frontend, or pool member.
	Name string `json:"name"`
	// Pool is the backend pool of remove-pool-member.
	Pool string `json:"pool,omitempty"`
	// IntervalInSeconds is change-probe's new interval (0: the current one plus 5).
	IntervalInSeconds int `json:"intervalInSeconds,omitempty"`
	// PublicIP is change-frontend-ip's public IP ID ("": a new one is created).
	PublicIP string `json:"publicIP,omitempty"`
}

// Result says what the edit wrote.
type Result struct {
	// Written are the IDs of the resources written, in order.
	Written []string `json:"written"`
}

// maxAttempts bounds the GET-edit-PUT rounds of one resource when another client wins the
// If-Match race.
const maxAttempts = 5

// Apply performs r on the ARM handler h (the engine).
func Apply(ctx context.Context, h http.Handler, r Request) (Result, error) {
	if r.Resource == "" || r.Name == "" {
		return Result{}, errors.New("drift: resource and name are required")
	}
	c := &caller{h: h}
	var res Result
	var err error
	switch r.Kind {
	case DeleteRule:
		err = c.edit(ctx, r.Resource, topology.NetworkAPIVersion, func(doc map[string]any) error {
			return remove(doc, "load balancing rule", r.Name, "loadBalancingRules")
		})
		res.Written = []string{r.Resource}
	case ChangeProbe:
		err = c.edit(ctx, r.Resource, topology.NetworkAPIVersion, func(doc map[string]any) error {
			p := find(doc, r.Name, "probes")
			if p == nil {
				return fmt.Errorf("drift: %s has no probe %q", r.Resource, r.Name)
			}
			props := arm.Props(p)
			interval := r.IntervalInSeconds
			if interval == 0 {
				cur, _ := props["intervalInSeconds"].(float64)
				interval = int(cur) + 5
			}
			props["intervalInSeconds"] = interval
			return nil
		})
		res.Written = []string{r.Resource}
	case RemoveNSGRule:
		err = c.edit(ctx, r.Resource, topology.NetworkAPIVersion, func(doc map[string]any) error {
			return remove(doc, "security rule", r.Name, "securityRules")
		})
		res.Written = []string{r.Resource}
	case RemovePoolMember:
		res.Written, err = c.removePoolMember(ctx, r)
	case ChangeFrontendIP:
		res.Written, err = c.changeFrontendIP(ctx, r)
	default:
		err = fmt.Errorf("drift: kind %q is not one of %v", r.Kind, Kinds)
	}
	if err != nil {
		return Result{}, err
	}
	return res, nil
}

func (c *caller) removePoolMember(ctx context.Context, r Request) ([]string, error) {
	if r.Pool == "" {
		return nil, errors.New("drift: remove-pool-member needs the pool")
	}
	lb, _, err := c.get(ctx, r.Resource, topology.NetworkAPIVersion)
	if err != nil {
		return nil, err
	}
	pool := find(lb, r.Pool, "backendAddressPools")
	if pool == nil {
		return nil, fmt.Errorf("drift: %s has no backend pool %q", r.Resource, r.Pool)
	}
	isEntry := func(e map[string]any) bool {
		return strings.EqualFold(arm.Str(e, "name"), r.Name) || arm.Str(arm.Props(e), "ipAddress") == r.Name
	}
	for _, e := range items(pool, "loadBalancerBackendAddresses") {
		if isEntry(e) {
			err := c.edit(ctx, r.Resource, topology.NetworkAPIVersion, func(doc map[string]any) error {
				p := find(doc, r.Pool, "backendAddressPools")
				if p == nil {
					return fmt.Errorf("drift: %s has no backend pool %q", r.Resource, r.Pool)
				}
				return removeWhere(p, "member", r.Name, "loadBalancerBackendAddresses", isEntry)
			})
			return []string{r.Resource}, err
		}
	}
	poolID := arm.Str(pool, "id")
	for _, ref := range items(pool, "backendIPConfigurations") {
		if strings.EqualFold(arm.Str(ref, "id"), r.Name) {
			return c.removeFromIPConfig(ctx, r.Name, poolID)
		}
	}
	return nil, fmt.Errorf("drift: backend pool %q of %s has no member %q (an address entry's name or IP, or an ip configuration ID)", r.Pool, r.Resource, r.Name)
}

// removeFromIPConfig writes the NIC or scale set VM of an ip configuration without the pool.
func (c *caller) removeFromIPConfig(ctx context.Context, ipConfigID, poolID string) ([]string, error) {
	lower := strings.ToLower(ipConfigID)
	i := strings.Index(lower, "/ipconfigurations/")
	if i < 0 {
		return nil, fmt.Errorf("drift: %s is not an ip configuration ID", ipConfigID)
	}
	ipcName := ipConfigID[i+len("/ipconfigurations/"):]
	nicID := ipConfigID[:i]
	dropPool := func(ipc map[string]any) error {
		return removeWhere(ipc, "pool reference", poolID, "loadBalancerBackendAddressPools", func(ref map[string]any) bool {
			return strings.EqualFold(arm.Str(ref, "id"), poolID)
		})
	}
	if j := strings.Index(lower, "/virtualmachines/"); strings.Contains(lower, "/virtualmachinescalesets/") && j >= 0 {
		// …/virtualMachineScaleSets/ss/virtualMachines/0/networkInterfaces/nic: the instance's
		// network profile holds the reference.
		k := strings.Index(lower[j+len("/virtualmachines/"):], "/")
		if k < 0 {
			return nil, fmt.Errorf("drift: %s is not a scale set VM ip configuration ID", ipConfigID)
		}
		vmID := ipConfigID[:j+len("/virtualmachines/")+k]
		nicName := nicID[strings.LastIndex(nicID, "/")+1:]
		err := c.edit(ctx, vmID, topology.ComputeAPIVersion, func(doc map[string]any) error {
			npc, _ := arm.Props(doc)["networkProfileConfiguration"].(map[string]any)
			nic := find(map[string]any{"properties": npc}, nicName, "networkInterfaceConfigurations")
			if nic == nil {
				return fmt.Errorf("drift: %s has no NIC configuration %q", vmID, nicName)
			}
			ipc := find(nic, ipcName, "ipConfigurations")
			if ipc == nil {
				return fmt.Errorf("drift: NIC configuration %q of %s has no ip configuration %q", nicName, vmID, ipcName)
			}
			return dropPool(ipc)
		})
		return []string{vmID}, err
	}
	err := c.edit(ctx, nicID, topology.NetworkAPIVersion, func(doc map[string]any) error {
		ipc := find(doc, ipcName, "ipConfigurations")
		if ipc == nil {
			return fmt.Errorf("drift: %s has no ip configuration %q", nicID, ipcName)
		}
		return dropPool(ipc)
	})
	return []string{nicID}, err
}

func (c *caller) changeFrontendIP(ctx context.Context, r Request) ([]string, error) {
	var written []string
	pipID := r.PublicIP
	if pipID == "" {
		lb, _, err := c.get(ctx, r.Resource, topology.NetworkAPIVersion)
		if err != nil {
			return nil, err
		}
		if find(lb, r.Name, "frontendIPConfigurations") == nil {
			return nil, fmt.Errorf("drift: %s has no frontend %q", r.Resource, r.Name)
		}
		id, err := arm.ParseID(r.Resource)
		if err != nil {
			return nil, fmt.Errorf("drift: %s: %w", r.Resource, err)
		}
		pipID = "/subscriptions/" + id.Subscription + "/resourceGroups/" + id.ResourceGroup +
			"/providers/Microsoft.Network/publicIPAddresses/" + r.Name + "-drift"
		body := map[string]any{"location": arm.Str(lb, "location"), "sku": map[string]any{"name": "Standard"},
			"properties": map[string]any{"publicIPAllocationMethod": "Static", "publicIPAddressVersion": "IPv4"}}
		if _, err := c.do(ctx, http.MethodPut, pipID, topology.NetworkAPIVersion, body, ""); err != nil {
			return nil, err
		}
		written = append(written, pipID)
	}
	err := c.edit(ctx, r.Resource, topology.NetworkAPIVersion, func(doc map[string]any) error {
		fe := find(doc, r.Name, "frontendIPConfigurations")
		if fe == nil {
			return fmt.Errorf("drift: %s has no frontend %q", r.Resource, r.Name)
		}
		props := arm.Props(fe)
		if _, ok := props["publicIPAddress"]; !ok {
			return fmt.Errorf("drift: frontend %q of %s is not public", r.Name, r.Resource)
		}
		props["publicIPAddress"] = map[string]any{"id": pipID}
		return nil
	})
	return append(written, r.Resource), err
}

// --- JSON documents ----------------------------------------------------------------------

// items are the objects of doc.properties[field].
func items(doc map[string]any, field string) []map[string]any {
	return arm.Arr(doc, "properties", field)
}

func find(doc map[string]any, name, field string) map[string]any {
	for _, m := range items(doc, field) {
		if strings.EqualFold(arm.Str(m, "name"), name) {
			return m
		}
	}
	return nil
}

func remove(doc map[string]any, what, name, field string) error {
	return removeWhere(doc, what, name, field, func(m map[string]any) bool { return strings.EqualFold(arm.Str(m, "name"), name) })
}

// removeWhere drops the elements of doc.properties[field] that match; none is an error.
func removeWhere(doc map[string]any, what, name, field string, match func(map[string]any) bool) error {
	props := arm.Props(doc)
	list, _ := props[field].([]any)
	kept := slices.DeleteFunc(slices.Clone(list), func(x any) bool {
		m, ok := x.(map[string]any)
		return ok && match(m)
	})
	if len(kept) == len(list) {
		return fmt.Errorf("drift: %s has no %s %q", arm.Str(doc, "name"), what, name)
	}
	props[field] = kept
	return nil
}

// --- in-process ARM calls ----------------------------------------------------------------

type caller struct{ h http.Handler }

// edit is GET, change, PUT with If-Match, again on a 412.
func (c *caller) edit(ctx context.Context, id, apiVersion string, change func(doc map[string]any) error) error {
	for attempt := 1; ; attempt++ {
		doc, etag, err := c.get(ctx, id, apiVersion)
		if err != nil {
			return err
		}
		if err := change(doc); err != nil {
			return err
		}
		trimReferences(doc)
		_, err = c.do(ctx, http.MethodPut, id, apiVersion, doc, etag)
		var se *statusError
		if errors.As(err, &se) && se.status == http.StatusPreconditionFailed && attempt < maxAttempts {
			continue
		}
		return err
	}
}

// trimReferences sends frontends' subnets as references, as careful clients do (ARM may return
// whole subnet objects there).
func trimReferences(doc map[string]any) {
	for _, fe := range items(doc, "frontendIPConfigurations") {
		p := arm.Props(fe)
		if s, ok := p["subnet"].(map[string]any); ok {
			p["subnet"] = map[string]any{"id": s["id"]}
		}
	}
}

func (c *caller) get(ctx context.Context, id, apiVersion string) (map[string]any, string, error) {
	body, err := c.do(ctx, http.MethodGet, id, apiVersion, nil, "")
	if err != nil {
		return nil, "", err
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, "", fmt.Errorf("drift: GET %s: %w", id, err)
	}
	return doc, arm.Str(doc, "etag"), nil
}

type statusError struct {
	method, id string
	status     int
	body       string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("drift: %s %s: %d %s", e.method, e.id, e.status, e.body)
}

// do sends one request to the engine. Operations finish at once (the edit is the test's, not
// a long-running change it waits for).
func (c *caller) do(ctx context.Context, method, id, apiVersion string, body any, ifMatch string) ([]byte, error) {
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	zero := time.Duration(0)
	ctx = arm.WithLROOptions(ctx, arm.LROOptions{Duration: &zero})
	req, err := http.NewRequestWithContext(ctx, method, "https://azsim.internal"+id+"?api-version="+apiVersion, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer azsim-drift")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "azsim-drift")
	if ifMatch != "" {
		req.Header.Set("If-Match", ifMatch)
	}
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, req)
	if rec.Code >= 300 {
		return nil, &statusError{method: method, id: id, status: rec.Code, body: strings.TrimSpace(rec.Body.String())}
	}
	return rec.Body.Bytes(), nil
}
