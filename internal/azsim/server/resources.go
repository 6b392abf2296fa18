package server

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// genericList serves ARM's generic resource lists, GET /subscriptions/{s}/resources and
// /subscriptions/{s}/resourceGroups/{g}/resources (az resource list), from a snapshot of the
// engine: every top-level resource with its envelope fields only. $filter "resourceGroup eq
// 'x'" is honoured; other filters are ignored.
var genericListPath = regexp.MustCompile(`(?i)^/subscriptions/([^/]+)(?:/resourceGroups/([^/]+))?/resources/?$`)

func matchGenericList(r *http.Request) bool {
	return r.Method == http.MethodGet && genericListPath.MatchString(r.URL.Path)
}

var filterRG = regexp.MustCompile(`(?i)resourceGroup\s+eq\s+'([^']*)'`)

func genericList(e *arm.Engine) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := genericListPath.FindStringSubmatch(r.URL.Path)
		sub, rg := m[1], m[2]
		if f := filterRG.FindStringSubmatch(r.URL.Query().Get("$filter")); f != nil && rg == "" {
			rg = f[1]
		}
		snap, err := e.Snapshot()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		var s struct {
			Resources []struct {
				ID  string         `json:"id"`
				Doc map[string]any `json:"doc"`
			} `json:"resources"`
		}
		if err := json.Unmarshal(snap, &s); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		value := []map[string]any{}
		for _, res := range s.Resources {
			parts := strings.Split(strings.Trim(res.ID, "/"), "/")
			// subscriptions/{s}/resourceGroups/{g}/providers/{ns}/{type}/{name}: top level only.
			if len(parts) != 8 || !strings.EqualFold(parts[1], sub) || (rg != "" && !strings.EqualFold(parts[3], rg)) {
				continue
			}
			item := map[string]any{"id": res.ID}
			for _, k := range []string{"name", "type", "location", "tags", "sku", "kind", "managedBy", "zones", "identity"} {
				if v, ok := res.Doc[k]; ok {
					item[k] = v
				}
			}
			value = append(value, item)
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_ = json.NewEncoder(w).Encode(map[string]any{"value": value})
	})
}
