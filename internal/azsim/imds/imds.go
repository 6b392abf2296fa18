// Package imds is azsim's Azure Instance Metadata Service: the plain-HTTP
// /metadata/instance document of a chosen VM, built from the ARM engine's stored VM,
// scale set instance and NIC documents, plus the managed-identity token path.
package imds

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// Store is the part of the ARM engine IMDS reads: resource listing by type, and the ARM
// handler itself for views (instance views, scale set NICs) that only exist on the wire.
type Store interface {
	ListResources(resourceType string) [][]byte
	http.Handler
}

// Server serves IMDS.
type Server struct {
	store Store
	// TokenHandler serves /metadata/identity/oauth2/token (identity.Service.IMDSTokenHandler).
	TokenHandler http.Handler

	mu         sync.RWMutex
	defaultVM  string
	azEnvironm string
	// subFaultDomains are the platform sub fault domains of VMs, by lower-cased resource ID:
	// Azure shows them in IMDS only, so ARM documents cannot carry them.
	subFaultDomains map[string]string
}

// New returns an IMDS server over store.
func New(store Store) *Server { return &Server{store: store, azEnvironm: "AzurePublicCloud"} }

// SetDefaultVM chooses the VM answered when a request names none: a VM name, a scale set
// instance name ("pool_3"), a computer name or a resource ID.
func (s *Server) SetDefaultVM(vm string) {
	s.mu.Lock()
	s.defaultVM = vm
	s.mu.Unlock()
}

// SetSubFaultDomain sets the compute.platformSubFaultDomain of a VM or scale set instance, by
// resource ID ("" removes it).
func (s *Server) SetSubFaultDomain(vmID, subFaultDomain string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if subFaultDomain == "" {
		delete(s.subFaultDomains, strings.ToLower(vmID))
		return
	}
	if s.subFaultDomains == nil {
		s.subFaultDomains = map[string]string{}
	}
	s.subFaultDomains[strings.ToLower(vmID)] = subFaultDomain
}

// SubFaultDomain returns what SetSubFaultDomain set for a VM.
func (s *Server) SubFaultDomain(vmID string) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.subFaultDomains[strings.ToLower(vmID)]
}

// ResetSubFaultDomains forgets every VM's sub fault domain.
func (s *Server) ResetSubFaultDomains() {
	s.mu.Lock()
	s.subFaultDomains = nil
	s.mu.Unlock()
}

// DefaultVM returns the VM set by SetDefaultVM.
func (s *Server) DefaultVM() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.defaultVM
}

// supportedVersions are the api-versions IMDS accepts (a subset of the real list).
var supportedVersions = []string{
	"2017-03-01", "2017-04-02", "2017-08-01", "2017-12-01", "2018-02-01", "2018-04-02", "2018-10-01",
	"2019-02-01", "2019-03-11", "2019-04-30", "2019-06-01", "2019-06-04", "2019-08-01", "2019-08-15",
	"2019-11-01", "2020-06-01", "2020-07-15", "2020-09-01", "2020-10-01", "2020-12-01", "2021-01-01",
	"2021-02-01", "2021-03-01", "2021-05-01", "2021-08-01", "2021-10-01", "2021-11-01", "2021-11-15",
	"2021-12-13", "2022-02-01", "2022-03-01", "2022-07-01", "2022-08-01", "2022-11-01", "2023-07-01",
	"2023-11-15", "2024-03-15", "2024-07-17", "2025-04-07",
}

func versionOK(v string) bool {
	for _, s := range supportedVersions {
		if s == v {
			return true
		}
	}
	return false
}

// ServeHTTP implements the IMDS routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/metadata/identity/oauth2/token" && s.TokenHandler != nil {
		s.TokenHandler.ServeHTTP(w, r)
		return
	}
	if !strings.EqualFold(r.Header.Get("Metadata"), "true") {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "Bad request. Required metadata header not specified"})
		return
	}
	if r.Header.Get("X-Forwarded-For") != "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "Bad request. X-Forwarded-For header is not allowed"})
		return
	}
	q := r.URL.Query()
	for k, v := range q {
		if len(v) > 1 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "Bad request. Query parameter " + k + " is duplicated"})
			return
		}
	}
	if !versionOK(q.Get("api-version")) {
		writeJSON(w, http.StatusBadRequest, map[string]any{
			"error":           "Bad request. api-version is invalid or was not specified in the request. For more information refer to aka.ms/azureimds",
			"newest-versions": []string{"2025-04-07", "2024-07-17", "2024-03-15"},
		})
		return
	}
	path := strings.Trim(r.URL.Path, "/")
	switch {
	case path == "metadata/loadbalancer":
		writeJSON(w, http.StatusOK, map[string]any{"loadbalancer": map[string]any{
			"publicIpAddresses": []any{}, "inboundRules": []any{}, "outboundRules": []any{}}})
		return
	case path == "metadata/instance" || strings.HasPrefix(path, "metadata/instance/"):
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "Not found"})
		return
	}
	sel := r.Header.Get("X-Azsim-Vm")
	if sel == "" {
		sel = q.Get("azsim-vm")
	}
	if sel == "" {
		sel = s.DefaultVM()
	}
	if sel == "" {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "azsim: no VM selected; send X-Azsim-Vm, ?azsim-vm= or set the default VM through the control API"})
		return
	}
	doc, err := s.Instance(r.Context(), sel)
	if err != nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
		return
	}
	var tree any
	b, _ := json.Marshal(doc)
	_ = json.Unmarshal(b, &tree)
	for _, seg := range strings.Split(strings.TrimPrefix(strings.TrimPrefix(path, "metadata/instance"), "/"), "/") {
		if seg == "" {
			continue
		}
		next, ok := step(tree, seg)
		if !ok {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "Not found"})
			return
		}
		tree = next
	}
	format := q.Get("format")
	switch v := tree.(type) {
	case map[string]any, []any:
		if format == "text" {
			writeText(w, textListing(v))
			return
		}
		writeJSON(w, http.StatusOK, v)
	default:
		if format != "text" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "Bad request. Leaf nodes only support text format."})
			return
		}
		writeText(w, fmt.Sprint(v))
	}
}

func step(tree any, seg string) (any, bool) {
	switch t := tree.(type) {
	case map[string]any:
		v, ok := t[seg]
		return v, ok
	case []any:
		i, err := strconv.Atoi(seg)
		if err != nil || i < 0 || i >= len(t) {
			return nil, false
		}
		return t[i], true
	}
	return nil, false
}

// textListing is IMDS' text form of a non-leaf: one key (or index) per line, "/" after keys
// that are not leaves.
func textListing(v any) string {
	var lines []string
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			switch x.(type) {
			case map[string]any, []any:
				k += "/"
			}
			lines = append(lines, k)
		}
	case []any:
		for i := range t {
			lines = append(lines, strconv.Itoa(i)+"/")
		}
	}
	sortStrings(lines)
	return strings.Join(lines, "\n")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeText(w http.ResponseWriter, s string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(s))
}
