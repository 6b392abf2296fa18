package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/internal/azsim/client"
	"github.com/azure-ccm/azure-ccm/test/framework"
	"github.com/azure-ccm/azure-ccm/test/framework/azurenames"
)

const networkAPI = "2024-05-01"

// userState is what the user owned before the run; it must come out unchanged.
type userState struct {
	pipID, pipAddress string
	nsgID             string
	rule              map[string]any // the user's NSG rule properties
	lbID, lbEtag      string
	plsID, plsEtag    string
}

// seedUserResources creates resources the CCM must never change: a public IP the user owns (a
// service may name it), a rule of the user's in the cluster's NSG, and a load balancer of the
// user's in the cluster's resource group.
func seedUserResources(t *testing.T, e *framework.Env) userState {
	t.Helper()
	a := e.Azure
	rg := "/subscriptions/" + a.SubscriptionID + "/resourceGroups/" + a.ResourceGroup + "/providers/Microsoft.Network/"
	subnet := "/subscriptions/" + a.SubscriptionID + "/resourceGroups/" + a.VnetResourceGroup + "/providers/Microsoft.Network/virtualNetworks/" +
		a.VnetName + "/subnets/" + a.SubnetName
	put := func(id string, body any) map[string]any {
		b, _ := json.Marshal(body)
		req := httptest.NewRequest(http.MethodPut, a.URL+id+"?api-version="+networkAPI, strings.NewReader(string(b)))
		req.Header.Set("Authorization", "Bearer chaos")
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		a.Server.Engine().ServeHTTP(rec, req)
		if rec.Code >= 300 {
			t.Fatalf("seed %s: %d %s", id, rec.Code, rec.Body.String())
		}
		doc, err := e.Azsim.Get(context.Background(), id)
		if err != nil {
			t.Fatalf("seed %s: %v", id, err)
		}
		return doc
	}
	var u userState
	u.pipID = rg + "publicIPAddresses/" + userPIPName
	pip := put(u.pipID, map[string]any{"location": a.Location, "sku": map[string]any{"name": "Standard"}, "tags": map[string]any{"owner": "user"},
		"properties": map[string]any{"publicIPAllocationMethod": "Static", "publicIPAddressVersion": "IPv4"}})
	u.pipAddress = str(pip, "properties", "ipAddress")

	u.nsgID = rg + "networkSecurityGroups/" + a.SecurityGroupName
	nsg, err := e.Azsim.Get(context.Background(), u.nsgID)
	if err != nil {
		t.Fatal(err)
	}
	u.rule = map[string]any{"protocol": "Tcp", "sourcePortRange": "*", "destinationPortRange": "22", "sourceAddressPrefix": "10.0.0.0/8",
		"destinationAddressPrefix": "*", "access": "Allow", "priority": float64(4000), "direction": "Inbound"}
	props, _ := nsg["properties"].(map[string]any)
	rules, _ := props["securityRules"].([]any)
	props["securityRules"] = append(rules, map[string]any{"name": userRuleName, "properties": u.rule})
	put(u.nsgID, map[string]any{"location": a.Location, "properties": map[string]any{"securityRules": props["securityRules"]}})

	u.lbID = rg + "loadBalancers/" + userLBName
	lb := put(u.lbID, map[string]any{"location": a.Location, "sku": map[string]any{"name": "Standard"},
		"properties": map[string]any{"frontendIPConfigurations": []any{map[string]any{"name": "fe",
			"properties": map[string]any{"subnet": map[string]any{"id": subnet}}}}}})
	u.lbEtag = str(lb, "etag")

	// A private link service of the user's on their load balancer (its NAT subnet needs the
	// policies off, as Azure does; the CCM's own PLS use the same subnet).
	snID := subnet
	sn, err := e.Azsim.Get(context.Background(), snID)
	if err != nil {
		t.Fatal(err)
	}
	snProps, _ := sn["properties"].(map[string]any)
	snProps["privateLinkServiceNetworkPolicies"] = "Disabled"
	put(snID, map[string]any{"properties": snProps})
	u.plsID = rg + "privateLinkServices/" + userPLSName
	put(u.plsID, map[string]any{"location": a.Location, "properties": map[string]any{
		"loadBalancerFrontendIpConfigurations": []any{map[string]any{"id": u.lbID + "/frontendIPConfigurations/fe"}},
		"ipConfigurations": []any{map[string]any{"name": "nat", "properties": map[string]any{"primary": true,
			"privateIPAllocationMethod": "Dynamic", "subnet": map[string]any{"id": subnet}}}}}})
	doc, err := e.Azsim.Get(context.Background(), u.plsID)
	if err != nil {
		t.Fatal(err)
	}
	u.plsEtag = str(doc, "etag")
	// The user's PLS moved their load balancer's ETag.
	if lb, err := e.Azsim.Get(context.Background(), u.lbID); err == nil {
		u.lbEtag = str(lb, "etag")
	}
	return u
}

// checkInvariants compares azsim's state with what the cluster's services and nodes ask for.
func checkInvariants(ctx context.Context, e *framework.Env, u userState) error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	svcList, err := e.Kube.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	nodeList, err := e.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var public, internal []corev1.Service
	ingress := map[string]string{} // service name -> IP
	for _, s := range svcList.Items {
		if s.DeletionTimestamp != nil {
			fail("service %s is still being deleted", s.Name)
			continue
		}
		if len(s.Status.LoadBalancer.Ingress) == 0 || s.Status.LoadBalancer.Ingress[0].IP == "" {
			fail("service %s has no IP", s.Name)
			continue
		}
		ingress[s.Name] = s.Status.LoadBalancer.Ingress[0].IP
		if s.Annotations[annInternal] == "true" {
			internal = append(internal, s)
		} else {
			public = append(public, s)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}

	var eligible []string
	for _, n := range nodeList.Items {
		if _, excluded := n.Labels[excludeLabel]; excluded {
			continue
		}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				eligible = append(eligible, a.Address)
				break
			}
		}
	}
	sort.Strings(eligible)

	a := e.Azure
	base := "/subscriptions/" + a.SubscriptionID + "/resourceGroups/" + a.ResourceGroup + "/providers/Microsoft.Network/"
	for _, lb := range []struct {
		name string
		svcs []corev1.Service
	}{{azurenames.LoadBalancerName(clusterName, false), public}, {azurenames.LoadBalancerName(clusterName, true), internal}} {
		doc, err := getOptional(ctx, e.Azsim, base+"loadBalancers/"+lb.name)
		if err != nil {
			return err
		}
		checkLB(lb.name, doc, lb.svcs, eligible, fail)
	}
	checkPublicIPs(ctx, e, u, public, ingress, fail)
	checkOwnedPublicIPsUsed(ctx, e, ingress, fail)
	checkNSG(ctx, e, u, svcList.Items, ingress, fail)
	checkPrivateLinks(ctx, e, u, internal, fail)

	if doc, err := e.Azsim.Get(ctx, u.lbID); err != nil {
		fail("the user's load balancer: %v", err)
	} else if str(doc, "etag") != u.lbEtag {
		fail("the user's load balancer was changed (etag %s, was %s)", str(doc, "etag"), u.lbEtag)
	}
	return errors.Join(errs...)
}

// checkLB: frontends, rules and probes are exactly those of the services; each rule's probe
// exists and its idle timeout follows the annotation; the pool holds the eligible nodes.
func checkLB(name string, doc map[string]any, svcs []corev1.Service, eligible []string, fail func(string, ...any)) {
	if doc == nil {
		if len(svcs) > 0 {
			fail("load balancer %s is missing (%d services)", name, len(svcs))
		}
		return
	}
	wantFE, wantRules := map[string]bool{}, map[string]int{} // rule -> idle timeout
	for _, s := range svcs {
		lbName := azurenames.ServiceLBName(s.UID)
		wantFE[azurenames.FrontendName(lbName, "", false, azurenames.IPv4)] = true
		idle := 4
		if v, ok := s.Annotations[annIdle]; ok {
			idle, _ = strconv.Atoi(v)
		}
		for _, p := range s.Spec.Ports {
			wantRules[azurenames.RuleName(lbName, "", p.Protocol, p.Port, false, azurenames.IPv4)] = idle
		}
	}
	haveFE := names(arr(doc, "properties", "frontendIPConfigurations"))
	if missing, extra := diff(keys(wantFE), haveFE); len(missing)+len(extra) > 0 {
		fail("%s frontends: missing %v, orphaned %v", name, missing, extra)
	}
	// A public frontend carries its service's public IP (a third party may have pointed it
	// elsewhere: the drift audit puts it back).
	for _, fe := range arr(doc, "properties", "frontendIPConfigurations") {
		pip := str(fe, "properties", "publicIPAddress", "id")
		if pip == "" {
			continue
		}
		for _, s := range svcs {
			lbName := azurenames.ServiceLBName(s.UID)
			if str(fe, "name") != azurenames.FrontendName(lbName, "", false, azurenames.IPv4) {
				continue
			}
			want := azurenames.PublicIPName(clusterName, lbName, "", false, azurenames.IPv4)
			if s.Annotations[annPIPName] == userPIPName {
				want = userPIPName
			}
			if !strings.EqualFold(pip[strings.LastIndex(pip, "/")+1:], want) {
				fail("%s frontend %s of %s uses public IP %s, want %s", name, str(fe, "name"), s.Name, pip, want)
			}
		}
	}
	probes := map[string]bool{}
	for _, p := range arr(doc, "properties", "probes") {
		probes[strings.ToLower(str(p, "id"))] = true
		if !ownedByAny(str(p, "name"), svcs) {
			fail("%s: orphaned probe %s", name, str(p, "name"))
		}
		// The services have no probe annotations: the default interval.
		if got := num(p, "properties", "intervalInSeconds"); got != 5 {
			fail("%s probe %s interval %d s, want 5", name, str(p, "name"), got)
		}
	}
	rules := arr(doc, "properties", "loadBalancingRules")
	if missing, extra := diff(keys(wantRules), names(rules)); len(missing)+len(extra) > 0 {
		fail("%s rules: missing %v, orphaned %v", name, missing, extra)
	}
	for _, r := range rules {
		rn := str(r, "name")
		if pid := str(r, "properties", "probe", "id"); pid != "" && !probes[strings.ToLower(pid)] {
			fail("%s rule %s points at missing probe %s", name, rn, pid)
		}
		if want, ok := wantRules[rn]; ok {
			if got := num(r, "properties", "idleTimeoutInMinutes"); got != want {
				fail("%s rule %s idle timeout %d, want %d", name, rn, got, want)
			}
		}
	}
	if len(svcs) == 0 {
		return
	}
	for _, p := range arr(doc, "properties", "backendAddressPools") {
		if !strings.EqualFold(str(p, "name"), azurenames.BackendPoolName(clusterName, azurenames.IPv4)) {
			continue
		}
		var have []string
		for _, ad := range arr(p, "properties", "loadBalancerBackendAddresses") {
			have = append(have, str(ad, "properties", "ipAddress"))
		}
		if refs := arr(p, "properties", "backendIPConfigurations"); len(have) == 0 && len(refs) > 0 {
			// NIC-based pool: count members (their IDs are NIC ip configurations).
			if len(refs) != len(eligible) {
				fail("%s pool has %d NIC members, want %d eligible nodes", name, len(refs), len(eligible))
			}
			return
		}
		if missing, extra := diff(eligible, have); len(missing)+len(extra) > 0 {
			fail("%s pool: missing nodes %v, stale members %v", name, missing, extra)
		}
		return
	}
	fail("%s has no backend pool %s", name, clusterName)
}

// checkPrivateLinks: the cluster's private link services are exactly those of the internal
// services asking for one, each on its service's frontend; the user's is untouched.
func checkPrivateLinks(ctx context.Context, e *framework.Env, u userState, internal []corev1.Service, fail func(string, ...any)) {
	all, err := e.Azsim.List(ctx, "Microsoft.Network/privateLinkServices")
	if err != nil {
		fail("list private link services: %v", err)
		return
	}
	want := map[string]string{} // PLS name -> frontend name
	for _, s := range internal {
		if s.Annotations[annPLS] == "true" {
			fe := azurenames.FrontendName(azurenames.ServiceLBName(s.UID), "", false, azurenames.IPv4)
			want[strings.ToLower(azurenames.PrivateLinkName(fe))] = fe
		}
	}
	userSeen := false
	for _, p := range all {
		name := str(p, "name")
		if strings.EqualFold(str(p, "id"), u.plsID) {
			userSeen = true
			if str(p, "etag") != u.plsEtag {
				fail("the user's private link service was changed")
			}
			continue
		}
		fe, wanted := want[strings.ToLower(name)]
		switch {
		case !wanted:
			fail("orphaned private link service %s (tags %v)", name, p["tags"])
		default:
			delete(want, strings.ToLower(name))
			fes := arr(p, "properties", "loadBalancerFrontendIpConfigurations")
			if len(fes) != 1 || !strings.HasSuffix(strings.ToLower(str(fes[0], "id")), "/frontendipconfigurations/"+strings.ToLower(fe)) {
				fail("private link service %s is not on frontend %s", name, fe)
			}
		}
	}
	for name := range want {
		fail("private link service %s is missing", name)
	}
	if !userSeen {
		fail("the user's private link service was deleted")
	}
}

// checkPublicIPs: the cluster's public IPs are exactly those of public services (by name and
// address); the user's public IP is untouched and never tagged as the cluster's.
func checkPublicIPs(ctx context.Context, e *framework.Env, u userState, public []corev1.Service, ingress map[string]string, fail func(string, ...any)) {
	pips, err := e.Azsim.List(ctx, "Microsoft.Network/publicIPAddresses")
	if err != nil {
		fail("list public IPs: %v", err)
		return
	}
	byName := map[string]map[string]any{}
	for _, p := range pips {
		byName[strings.ToLower(str(p, "name"))] = p
	}
	want := map[string]bool{}
	for _, s := range public {
		if s.Annotations[annPIPName] == userPIPName {
			if ingress[s.Name] != u.pipAddress {
				fail("service %s uses the user's IP but shows %s, want %s", s.Name, ingress[s.Name], u.pipAddress)
			}
			continue
		}
		n := azurenames.PublicIPName(clusterName, azurenames.ServiceLBName(s.UID), "", false, azurenames.IPv4)
		want[strings.ToLower(n)] = true
		p, ok := byName[strings.ToLower(n)]
		switch {
		case !ok:
			fail("public IP %s of service %s is missing", n, s.Name)
		case str(p, "properties", "ipAddress") != ingress[s.Name]:
			fail("service %s shows %s but its public IP %s has %s", s.Name, ingress[s.Name], n, str(p, "properties", "ipAddress"))
		}
	}
	for _, p := range pips {
		tags := tagsOf(p)
		if c, ok := azurenames.ClusterTagValue(tags); ok && c == clusterName && !want[strings.ToLower(str(p, "name"))] {
			fail("orphaned public IP %s (service tag %q)", str(p, "name"), deref(tags, azurenames.TagService))
		}
	}
	up, ok := byName[userPIPName]
	switch {
	case !ok:
		fail("the user's public IP was deleted")
	case str(up, "properties", "ipAddress") != u.pipAddress:
		fail("the user's public IP changed address to %s", str(up, "properties", "ipAddress"))
	default:
		if _, tagged := azurenames.ClusterTagValue(tagsOf(up)); tagged {
			fail("the user's public IP was tagged as the cluster's")
		}
		if deref(tagsOf(up), "owner") != "user" {
			fail("the user's tags on their public IP were changed: %v", up["tags"])
		}
	}
}

// checkOwnedPublicIPsUsed: no public IP that this cluster owns by its tags — the cluster's
// name tag, or a service tag without any cluster's name tag (the existing provider's legacy
// ownership) — is used by no service, in any resource group: every one carries the address a
// service shows. Read from azsim's whole state, not from the groups the CCM looks in.
func checkOwnedPublicIPsUsed(ctx context.Context, e *framework.Env, ingress map[string]string, fail func(string, ...any)) {
	pips, err := e.Azsim.List(ctx, "Microsoft.Network/publicIPAddresses")
	if err != nil {
		fail("list public IPs: %v", err)
		return
	}
	used := map[string]bool{}
	for _, ip := range ingress {
		used[ip] = true
	}
	for _, p := range pips {
		tags := tagsOf(p)
		cluster, hasCluster := azurenames.ClusterTagValue(tags)
		services, hasService := azurenames.ServiceTagValue(tags)
		owned := (hasCluster && strings.EqualFold(cluster, clusterName)) || (hasService && !hasCluster)
		if owned && !used[str(p, "properties", "ipAddress")] {
			fail("public IP %s (%s) is owned by the cluster (service tag %q) but no service uses it", str(p, "id"), str(p, "properties", "ipAddress"), services)
		}
	}
}

// checkNSG: the managed allow rules target exactly the services' IPs, on their ports, from
// their source ranges; the user's rule is untouched.
func checkNSG(ctx context.Context, e *framework.Env, u userState, svcs []corev1.Service, ingress map[string]string, fail func(string, ...any)) {
	nsg, err := e.Azsim.Get(ctx, u.nsgID)
	if err != nil {
		fail("NSG: %v", err)
		return
	}
	ports, sources := map[string]map[string]bool{}, map[string]map[string]bool{}
	add := func(m map[string]map[string]bool, k string, vs ...string) {
		if m[k] == nil {
			m[k] = map[string]bool{}
		}
		for _, v := range vs {
			m[k][v] = true
		}
	}
	userSeen := false
	for _, r := range arr(nsg, "properties", "securityRules") {
		name, p := str(r, "name"), obj(r, "properties")
		if name == userRuleName {
			userSeen = true
			for k, v := range u.rule {
				if fmt.Sprint(p[k]) != fmt.Sprint(v) {
					fail("the user's NSG rule changed: %s=%v, was %v", k, p[k], v)
				}
			}
			continue
		}
		if !azurenames.IsManagedSecurityRule(name, int32(num(r, "properties", "priority"))) || str(r, "properties", "access") != "Allow" {
			continue
		}
		for _, dst := range listOrOne(p, "destinationAddressPrefixes", "destinationAddressPrefix") {
			add(ports, dst, listOrOne(p, "destinationPortRanges", "destinationPortRange")...)
			add(sources, dst, listOrOne(p, "sourceAddressPrefixes", "sourceAddressPrefix")...)
		}
	}
	if !userSeen {
		fail("the user's NSG rule %s was removed", userRuleName)
	}
	want := map[string]bool{}
	for _, s := range svcs {
		ip := ingress[s.Name]
		want[ip] = true
		// The existing provider's rule: an internal service without source ranges gets no allow
		// rule (the NSG's default AllowVnetInBound admits its clients).
		var wantPorts []string
		if s.Annotations[annInternal] != "true" || len(s.Spec.LoadBalancerSourceRanges) > 0 {
			for _, p := range s.Spec.Ports {
				wantPorts = append(wantPorts, strconv.Itoa(int(p.Port)))
			}
		}
		if missing, extra := diff(wantPorts, keys(ports[ip])); len(missing)+len(extra) > 0 {
			fail("NSG rules for %s (%s): missing ports %v, stale ports %v", s.Name, ip, missing, extra)
		}
		if len(s.Spec.LoadBalancerSourceRanges) > 0 {
			if missing, extra := diff(s.Spec.LoadBalancerSourceRanges, keys(sources[ip])); len(missing)+len(extra) > 0 {
				fail("NSG rules for %s (%s): missing sources %v, stale sources %v", s.Name, ip, missing, extra)
			}
		}
	}
	for ip := range ports {
		if !want[ip] {
			fail("orphaned NSG allow rule for %s", ip)
		}
	}
}

func getOptional(ctx context.Context, c *client.Client, id string) (map[string]any, error) {
	doc, err := c.Get(ctx, id)
	var apiErr *client.APIError
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound {
		return nil, nil
	}
	return doc, err
}

func ownedByAny(name string, svcs []corev1.Service) bool {
	for _, s := range svcs {
		if azurenames.OwnedByService(azurenames.ServiceLBName(s.UID), name) {
			return true
		}
	}
	return false
}

func obj(m map[string]any, path ...string) map[string]any {
	cur := m
	for _, p := range path {
		next, _ := cur[p].(map[string]any)
		if next == nil {
			return map[string]any{}
		}
		cur = next
	}
	return cur
}

func str(m map[string]any, path ...string) string {
	v, _ := obj(m, path[:len(path)-1]...)[path[len(path)-1]].(string)
	return v
}

func num(m map[string]any, path ...string) int {
	switch v := obj(m, path[:len(path)-1]...)[path[len(path)-1]].(type) {
	case float64:
		return int(v)
	case json.Number:
		n, _ := v.Int64()
		return int(n)
	}
	return 0
}

func arr(m map[string]any, path ...string) []map[string]any {
	raw, _ := obj(m, path[:len(path)-1]...)[path[len(path)-1]].([]any)
	out := make([]map[string]any, 0, len(raw))
	for _, r := range raw {
		if o, ok := r.(map[string]any); ok {
			out = append(out, o)
		}
	}
	return out
}

func listOrOne(p map[string]any, many, one string) []string {
	var out []string
	if l, ok := p[many].([]any); ok {
		for _, v := range l {
			out = append(out, fmt.Sprint(v))
		}
	}
	if v, ok := p[one].(string); ok && v != "" {
		out = append(out, v)
	}
	return out
}

func names(items []map[string]any) []string {
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, str(it, "name"))
	}
	return out
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// diff returns what want has and have lacks, and the reverse (case-insensitive).
func diff(want, have []string) (missing, extra []string) {
	norm := func(l []string) []string {
		out := make([]string, 0, len(l))
		for _, s := range l {
			out = append(out, strings.ToLower(s))
		}
		return out
	}
	w, h := norm(want), norm(have)
	for _, s := range w {
		if !slices.Contains(h, s) {
			missing = append(missing, s)
		}
	}
	for _, s := range h {
		if !slices.Contains(w, s) {
			extra = append(extra, s)
		}
	}
	return missing, extra
}

func tagsOf(doc map[string]any) map[string]*string {
	out := map[string]*string{}
	if t, ok := doc["tags"].(map[string]any); ok {
		for k, v := range t {
			s := fmt.Sprint(v)
			out[k] = &s
		}
	}
	return out
}

func deref(tags map[string]*string, k string) string {
	for kk, v := range tags {
		if strings.EqualFold(kk, k) && v != nil {
			return *v
		}
	}
	return ""
}
