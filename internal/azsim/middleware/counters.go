package middleware

import (
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Count is the number of requests with one (method, resource type, status).
type Count struct {
	Method       string `json:"method"`
	ResourceType string `json:"resourceType"`
	Class        Class  `json:"class"`
	Status       int    `json:"status"`
	Count        int64  `json:"count"`
}

// ResourceCount is the number of requests of one class addressed to one top-level resource
// or to its children: the writes of a load balancer's backend pools count for the load
// balancer. Collection GETs and LRO status polls name no resource and are not counted here.
type ResourceCount struct {
	// ResourceType is the top-level type, e.g. "Microsoft.Network/loadBalancers".
	ResourceType  string `json:"resourceType"`
	ResourceGroup string `json:"resourceGroup"`
	Name          string `json:"name"`
	Class         Class  `json:"class"`
	Count         int64  `json:"count"`
}

// Stats is the counters' JSON form.
type Stats struct {
	Requests []Count `json:"requests"`
	// Resources are the counts by addressed resource (see ResourceCount).
	Resources []ResourceCount `json:"resources,omitempty"`
	// RoleActions are the role actions each client needed (authenticated requests): what a
	// custom role for the program must allow, join actions of referenced resources included.
	RoleActions []RoleActionCount `json:"roleActions,omitempty"`
	// APIVersions are the counts by resource type and api-version: what version a client
	// really sent (Azure Stack pins old ones).
	APIVersions []APIVersionCount `json:"apiVersions,omitempty"`
	// Throttled counts 429s from the throttling model; Faults counts requests hit by a rule.
	Throttled int64 `json:"throttled"`
	Faults    int64 `json:"faults"`
}

// APIVersionCount is the number of requests to one resource type with one api-version.
type APIVersionCount struct {
	ResourceType string `json:"resourceType"`
	APIVersion   string `json:"apiVersion"`
	Count        int64  `json:"count"`
}

type apiVersionKey struct{ typ, version string }

type countKey struct {
	method, typ string
	status      int
}

// resourceKey is a resource's lower-cased type, group and name plus the class.
type resourceKey struct {
	typ, group, name string
	class            Class
}

type roleActionKey struct {
	client, action string
	linked         bool
}

type counters struct {
	canonical   func(string) string // nil: the first spelling seen
	spellMu     sync.Mutex
	spelling    map[string]string // type as requested → canonical (canonical is asked once per spelling)
	mu          sync.Mutex
	counts      map[countKey]*Count
	resources   map[resourceKey]*ResourceCount
	roleActions map[roleActionKey]*RoleActionCount
	apiVersions map[apiVersionKey]*APIVersionCount
	throttled   int64
	faults      int64

	registry *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	throttl  prometheus.Counter
	faultsC  prometheus.Counter
}

func newCounters(canonical func(string) string) *counters {
	c := &counters{canonical: canonical, counts: map[countKey]*Count{}, resources: map[resourceKey]*ResourceCount{},
		roleActions: map[roleActionKey]*RoleActionCount{}, apiVersions: map[apiVersionKey]*APIVersionCount{}, registry: prometheus.NewRegistry()}
	c.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "azsim_arm_requests_total", Help: "ARM requests served by azsim, by method, resource type, class and status.",
	}, []string{"method", "resource_type", "class", "status"})
	c.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "azsim_arm_request_duration_seconds", Help: "Time azsim took to answer ARM requests, including modelled latency.",
		Buckets: []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"method", "resource_type", "class"})
	c.throttl = prometheus.NewCounter(prometheus.CounterOpts{Name: "azsim_arm_throttled_total", Help: "Requests refused by the throttling model."})
	c.faultsC = prometheus.NewCounter(prometheus.CounterOpts{Name: "azsim_arm_faults_total", Help: "Requests hit by a fault rule."})
	c.registry.MustRegister(c.requests, c.latency, c.throttl, c.faultsC)
	return c
}

func (c *counters) record(op Op, path, apiVersion string, status int, took time.Duration) {
	typ := op.ResourceType
	if typ == "" {
		typ = "other"
	} else {
		typ = c.spell(typ)
	}
	res, hasRes := addressedResource(path)
	if hasRes {
		res.ResourceType = c.spell(res.ResourceType)
	}
	c.mu.Lock()
	k := countKey{op.Method, strings.ToLower(typ), status}
	cnt := c.counts[k]
	if cnt == nil {
		// The first spelling seen is the one reported.
		cnt = &Count{Method: op.Method, ResourceType: typ, Class: op.Class, Status: status}
		c.counts[k] = cnt
	}
	cnt.Count++
	display := cnt.ResourceType
	if apiVersion != "" {
		vk := apiVersionKey{strings.ToLower(typ), apiVersion}
		vc := c.apiVersions[vk]
		if vc == nil {
			vc = &APIVersionCount{ResourceType: display, APIVersion: apiVersion}
			c.apiVersions[vk] = vc
		}
		vc.Count++
	}
	if hasRes {
		rk := resourceKey{strings.ToLower(res.ResourceType), strings.ToLower(res.ResourceGroup), strings.ToLower(res.Name), op.Class}
		rc := c.resources[rk]
		if rc == nil {
			res.Class = op.Class
			rc = &res
			c.resources[rk] = rc
		}
		rc.Count++
	}
	c.mu.Unlock()
	c.requests.WithLabelValues(op.Method, display, string(op.Class), strconv.Itoa(status)).Inc()
	c.latency.WithLabelValues(op.Method, display, string(op.Class)).Observe(took.Seconds())
}

// spell is the canonical spelling of a resource type (unchanged without a canonicalizer).
func (c *counters) spell(t string) string {
	if c.canonical == nil {
		return t
	}
	c.spellMu.Lock()
	defer c.spellMu.Unlock()
	s, ok := c.spelling[t]
	if !ok {
		if c.spelling == nil {
			c.spelling = map[string]string{}
		}
		s = c.canonical(t)
		c.spelling[t] = s
	}
	return s
}

// recordRoleActions counts the role actions a client's authenticated request needed.
func (c *counters) recordRoleActions(client, action string, linked []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	add := func(a string, isLinked bool) {
		k := roleActionKey{client, strings.ToLower(a), isLinked}
		rc := c.roleActions[k]
		if rc == nil {
			rc = &RoleActionCount{Client: client, Action: a, Linked: isLinked}
			c.roleActions[k] = rc
		}
		rc.Count++
	}
	if action != "" {
		add(action, false)
	}
	for _, a := range linked {
		add(a, true)
	}
}

func (c *counters) addThrottled() {
	c.mu.Lock()
	c.throttled++
	c.mu.Unlock()
	c.throttl.Inc()
}

func (c *counters) addFault() {
	c.mu.Lock()
	c.faults++
	c.mu.Unlock()
	c.faultsC.Inc()
}

func (c *counters) snapshot() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Stats{Requests: make([]Count, 0, len(c.counts)), Throttled: c.throttled, Faults: c.faults}
	for _, v := range c.counts {
		s.Requests = append(s.Requests, *v)
	}
	for _, v := range c.resources {
		s.Resources = append(s.Resources, *v)
	}
	for _, v := range c.roleActions {
		s.RoleActions = append(s.RoleActions, *v)
	}
	for _, v := range c.apiVersions {
		s.APIVersions = append(s.APIVersions, *v)
	}
	sort.Slice(s.APIVersions, func(i, j int) bool {
		a, b := s.APIVersions[i], s.APIVersions[j]
		if a.ResourceType != b.ResourceType {
			return a.ResourceType < b.ResourceType
		}
		return a.APIVersion < b.APIVersion
	})
	sort.Slice(s.RoleActions, func(i, j int) bool {
		a, b := s.RoleActions[i], s.RoleActions[j]
		if a.Client != b.Client {
			return a.Client < b.Client
		}
		return strings.ToLower(a.Action) < strings.ToLower(b.Action)
	})
	sort.Slice(s.Resources, func(i, j int) bool {
		a, b := s.Resources[i], s.Resources[j]
		if a.ResourceType != b.ResourceType {
			return a.ResourceType < b.ResourceType
		}
		if a.ResourceGroup != b.ResourceGroup {
			return a.ResourceGroup < b.ResourceGroup
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Class < b.Class
	})
	sort.Slice(s.Requests, func(i, j int) bool {
		a, b := s.Requests[i], s.Requests[j]
		if a.ResourceType != b.ResourceType {
			return a.ResourceType < b.ResourceType
		}
		if a.Method != b.Method {
			return a.Method < b.Method
		}
		return a.Status < b.Status
	})
	return s
}

// reset zeroes the JSON counters. Prometheus counters stay monotonic, as scrapers expect.
func (c *counters) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts = map[countKey]*Count{}
	c.resources = map[resourceKey]*ResourceCount{}
	c.roleActions = map[roleActionKey]*RoleActionCount{}
	c.apiVersions = map[apiVersionKey]*APIVersionCount{}
	c.throttled, c.faults = 0, 0
}

// Sum adds the counts of requests that match: empty method or resource type match any
// (resource types compare as in fault rules), status 0 matches any.
func (s Stats) Sum(method, resourceType string, status int) int64 {
	var n int64
	for _, c := range s.Requests {
		if (method == "" || strings.EqualFold(method, c.Method)) && typeMatches(resourceType, c.ResourceType) &&
			(status == 0 || status == c.Status) {
			n += c.Count
		}
	}
	return n
}

// APIVersionsOf lists the api-versions requests to a resource type were sent with (resource
// types compare as in fault rules), sorted.
func (s Stats) APIVersionsOf(resourceType string) []string {
	var out []string
	for _, v := range s.APIVersions {
		if typeMatches(resourceType, v.ResourceType) && !slices.Contains(out, v.APIVersion) {
			out = append(out, v.APIVersion)
		}
	}
	sort.Strings(out)
	return out
}

// ByClass adds the counts of one operation class for a resource type ("" = any).
func (s Stats) ByClass(class Class, resourceType string) int64 {
	var n int64
	for _, c := range s.Requests {
		if c.Class == class && typeMatches(resourceType, c.ResourceType) {
			n += c.Count
		}
	}
	return n
}

// Writes counts PUT and PATCH requests for a resource type ("" = any), whatever their status.
func (s Stats) Writes(resourceType string) int64 { return s.ByClass(Write, resourceType) }

// Reads counts GET/HEAD requests for a resource type.
func (s Stats) Reads(resourceType string) int64 { return s.ByClass(Read, resourceType) }

// Deletes counts DELETE requests for a resource type.
func (s Stats) Deletes(resourceType string) int64 { return s.ByClass(Delete, resourceType) }

// Actions counts POST requests for a resource type.
func (s Stats) Actions(resourceType string) int64 { return s.ByClass(Action, resourceType) }

// Total counts every request.
func (s Stats) Total() int64 { return s.Sum("", "", 0) }

// addressedResource finds the top-level resource a request path addresses:
// /subscriptions/{s}/resourceGroups/{rg}/providers/{namespace}/{type}/{name}[/...]. Paths
// without a resource name (collections, LRO status under locations) have none.
func addressedResource(path string) (ResourceCount, bool) {
	seg := strings.Split(strings.Trim(path, "/"), "/")
	if len(seg) < 8 || !strings.EqualFold(seg[0], "subscriptions") || !strings.EqualFold(seg[2], "resourceGroups") ||
		!strings.EqualFold(seg[4], "providers") || strings.EqualFold(seg[6], "locations") || seg[7] == "" {
		return ResourceCount{}, false
	}
	return ResourceCount{ResourceType: seg[5] + "/" + seg[6], ResourceGroup: seg[3], Name: seg[7]}, true
}

// ByResource adds the counts of one class ("" = any) of requests addressed to the named
// top-level resource of a type (compared as in fault rules; group and name case-insensitive,
// group "" = any).
func (s Stats) ByResource(class Class, resourceType, group, name string) int64 {
	var n int64
	for _, c := range s.Resources {
		if (class == "" || c.Class == class) && typeMatches(resourceType, c.ResourceType) &&
			(group == "" || strings.EqualFold(group, c.ResourceGroup)) && strings.EqualFold(name, c.Name) {
			n += c.Count
		}
	}
	return n
}

// RoleActionsOf is the set of role actions (lower case, call and linked) a client needed.
func (s Stats) RoleActionsOf(client string) map[string]bool {
	out := map[string]bool{}
	for _, a := range s.RoleActions {
		if a.Client == client {
			out[strings.ToLower(a.Action)] = true
		}
	}
	return out
}
