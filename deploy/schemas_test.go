package deploy

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestSchemaFileName(t *testing.T) {
	for _, c := range []struct{ apiVersion, kind, want string }{
		{"v1", "Secret", "secret-v1.json"},
		{"apps/v1", "Deployment", "deployment-apps-v1.json"},
		{"rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebinding-rbac-v1.json"},
		{"policy/v1", "PodDisruptionBudget", "poddisruptionbudget-policy-v1.json"},
		{"coordination.k8s.io/v1beta1", "Lease", "lease-coordination-v1beta1.json"},
	} {
		if got := SchemaFileName(c.apiVersion, c.kind); got != c.want {
			t.Errorf("SchemaFileName(%q, %q) = %q, want %q", c.apiVersion, c.kind, got, c.want)
		}
	}
}

const miniSwagger = `{"definitions": {
  "io.k8s.api.apps.v1.Deployment": {
    "type": "object",
    "x-kubernetes-group-version-kind": [{"group": "apps", "version": "v1", "kind": "Deployment"}],
    "properties": {"apiVersion": {"type": "string"}, "spec": {"$ref": "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"}}
  },
  "io.k8s.api.apps.v1.DeploymentSpec": {
    "type": "object",
    "properties": {"maxSurge": {"$ref": "#/definitions/intstr"}, "labels": {"type": "object", "additionalProperties": {"type": "string"}}}
  },
  "intstr": {"type": "string", "format": "int-or-string"},
  "io.k8s.api.core.v1.Secret": {
    "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "Secret"}],
    "properties": {"data": {"$ref": "#/definitions/missing"}}
  },
  "unrelated": {"type": "object", "properties": {"x": {"type": "string"}}}
}}`

func TestStrictSchema(t *testing.T) {
	s, err := ParseSwagger([]byte(miniSwagger))
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.StrictSchema("apps/v1", "Deployment")
	if err != nil {
		t.Fatal(err)
	}
	want := `{
	  "type": "object", "additionalProperties": false,
	  "x-kubernetes-group-version-kind": [{"group": "apps", "version": "v1", "kind": "Deployment"}],
	  "properties": {"apiVersion": {"type": "string"}, "spec": {"$ref": "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"}},
	  "definitions": {
	    "io.k8s.api.apps.v1.Deployment": {
	      "type": "object", "additionalProperties": false,
	      "x-kubernetes-group-version-kind": [{"group": "apps", "version": "v1", "kind": "Deployment"}],
	      "properties": {"apiVersion": {"type": "string"}, "spec": {"$ref": "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"}}
	    },
	    "io.k8s.api.apps.v1.DeploymentSpec": {
	      "type": "object", "additionalProperties": false,
	      "properties": {"maxSurge": {"$ref": "#/definitions/intstr"}, "labels": {"type": "object", "additionalProperties": {"type": "string"}}}
	    },
	    "intstr": {"oneOf": [{"type": "string"}, {"type": "number"}]}
	  }
	}`
	var w map[string]any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	// Round-trip got through JSON so both sides have the same types.
	b, _ := json.Marshal(got)
	var g map[string]any
	_ = json.Unmarshal(b, &g)
	if !reflect.DeepEqual(g, w) {
		t.Errorf("StrictSchema:\n got %s\nwant %s", b, want)
	}

	if _, err := s.StrictSchema("apps/v1", "StatefulSet"); err == nil {
		t.Error("unknown kind: no error")
	}
	if _, err := s.StrictSchema("v1", "Secret"); err == nil {
		t.Error("dangling reference: no error")
	}
	if _, err := ParseSwagger([]byte(`{"swagger": "2.0"}`)); err == nil {
		t.Error("document without definitions: no error")
	}
}
