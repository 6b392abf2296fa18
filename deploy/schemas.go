// Package deploy holds the checks of the deployment artefacts in this directory (Helm chart,
// plain manifests, Grafana dashboard) that need Go: JSON schemas for kubeconform generated from
// a kube-apiserver's OpenAPI document (no internet, so the public schema repository is out of
// reach), and the names of the metrics and event reasons the code defines, which the dashboard
// and docs/operations.md must match. hack/verify-deploy.sh runs its tests.
package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// GVK is a group, version and kind as the OpenAPI extension x-kubernetes-group-version-kind
// names it.
type GVK struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

// APIVersion is the manifest's apiVersion: "v1" for the core group, "apps/v1" otherwise.
func (g GVK) APIVersion() string {
	if g.Group == "" {
		return g.Version
	}
	return g.Group + "/" + g.Version
}

// SchemaFileName is the file kubeconform looks for with the schema location template
// "{{ .ResourceKind }}{{ .KindSuffix }}.json": the lower-case kind, then the first label of the
// group (if any) and the version, e.g. deployment-apps-v1.json, clusterrole-rbac-v1.json,
// secret-v1.json.
func SchemaFileName(apiVersion, kind string) string {
	group, version, found := strings.Cut(apiVersion, "/")
	suffix := "-" + strings.ToLower(strings.Split(group, ".")[0])
	if found {
		suffix += "-" + strings.ToLower(version)
	}
	return strings.ToLower(kind) + suffix + ".json"
}

// SchemaLocation is the kubeconform -schema-location template for a directory written by
// WriteSchemas.
func SchemaLocation(dir string) string {
	return filepath.Join(dir, "{{ .ResourceKind }}{{ .KindSuffix }}.json")
}

// Swagger is the part of an OpenAPI v2 document the conversion reads.
type Swagger struct {
	Definitions map[string]map[string]any `json:"definitions"`
}

// ParseSwagger decodes an OpenAPI v2 document (kube-apiserver's /openapi/v2).
func ParseSwagger(b []byte) (*Swagger, error) {
	var s Swagger
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("openapi v2: %w", err)
	}
	if len(s.Definitions) == 0 {
		return nil, fmt.Errorf("openapi v2: no definitions")
	}
	return &s, nil
}

// definitionOf finds the definition that declares gvk.
func (s *Swagger) definitionOf(apiVersion, kind string) (string, bool) {
	for name, def := range s.Definitions {
		for _, g := range gvksOf(def) {
			if g.APIVersion() == apiVersion && g.Kind == kind {
				return name, true
			}
		}
	}
	return "", false
}

func gvksOf(def map[string]any) []GVK {
	raw, ok := def["x-kubernetes-group-version-kind"]
	if !ok {
		return nil
	}
	b, _ := json.Marshal(raw)
	var out []GVK
	_ = json.Unmarshal(b, &out)
	return out
}

// StrictSchema is the standalone JSON schema of one kind: the kind's definition at the root
// and every definition it references (transitively) under "definitions", where the OpenAPI
// "#/definitions/..." references point. It is strict: objects with declared properties reject
// unknown fields (a misspelt key is an error, as kubectl's field validation makes it), and
// int-or-string and quantity fields accept both JSON types, as the API server does.
func (s *Swagger) StrictSchema(apiVersion, kind string) (map[string]any, error) {
	root, ok := s.definitionOf(apiVersion, kind)
	if !ok {
		return nil, fmt.Errorf("no OpenAPI definition for %s %s", apiVersion, kind)
	}
	defs := map[string]any{}
	queue := []string{root}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if _, done := defs[name]; done {
			continue
		}
		def, ok := s.Definitions[name]
		if !ok {
			return nil, fmt.Errorf("%s %s: dangling reference to %s", apiVersion, kind, name)
		}
		conv := strict(def).(map[string]any)
		defs[name] = conv
		queue = append(queue, refsOf(conv)...)
	}
	out := map[string]any{}
	for k, v := range defs[root].(map[string]any) {
		out[k] = v
	}
	out["definitions"] = defs
	return out, nil
}

// strict returns a converted deep copy of an OpenAPI schema node.
func strict(node any) any {
	switch n := node.(type) {
	case map[string]any:
		out := make(map[string]any, len(n)+1)
		for k, v := range n {
			out[k] = strict(v)
		}
		if f, _ := n["format"].(string); f == "int-or-string" || f == "quantity" {
			delete(out, "type")
			delete(out, "format")
			out["oneOf"] = []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}
		}
		if _, has := n["properties"]; has {
			if _, set := n["additionalProperties"]; !set {
				out["additionalProperties"] = false
			}
		}
		return out
	case []any:
		out := make([]any, len(n))
		for i, v := range n {
			out[i] = strict(v)
		}
		return out
	default:
		return node
	}
}

// refsOf lists the definitions a schema node references, sorted.
func refsOf(node any) []string {
	seen := map[string]bool{}
	var walk func(any)
	walk = func(v any) {
		switch n := v.(type) {
		case map[string]any:
			if r, ok := n["$ref"].(string); ok {
				if name, ok := strings.CutPrefix(r, "#/definitions/"); ok {
					seen[name] = true
				}
			}
			for _, c := range n {
				walk(c)
			}
		case []any:
			for _, c := range n {
				walk(c)
			}
		}
	}
	walk(node)
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// WriteSchemas writes the strict schema of every (apiVersion, kind) into dir under the name
// kubeconform looks for.
func (s *Swagger) WriteSchemas(dir string, kinds [][2]string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, k := range kinds {
		sch, err := s.StrictSchema(k[0], k[1])
		if err != nil {
			return err
		}
		b, err := json.Marshal(sch)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, SchemaFileName(k[0], k[1])), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
