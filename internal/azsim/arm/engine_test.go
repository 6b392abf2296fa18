package arm

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A generic compute-like type exercises the engine without the network package.
func newTestEngine(cfg Config) *Engine {
	e := NewEngine(cfg)
	e.Register(TypeSpec{Type: "Microsoft.Resources/resourceGroups", APIVersions: ResourcesAPIVersions, ETag: ETagNone, PutLRO: LRONone, DeleteLRO: LROLocation})
	e.Register(TypeSpec{Type: "Microsoft.Compute/virtualMachineScaleSets", APIVersions: ComputeAPIVersions, ETag: ETagCounter, Put: PutMerge,
		Patch: PatchMerge, OperationStatusExtras: true, CreatingState: "Creating"})
	e.Register(TypeSpec{Type: "Microsoft.Compute/virtualMachineScaleSets/virtualMachines", APIVersions: ComputeAPIVersions, ETag: ETagCounter,
		VirtualGet: func(tx *Tx, id ResourceID) (map[string]any, error) {
			if id.Name() == "boom" {
				panic("handler bug")
			}
			return map[string]any{"id": id.String(), "name": id.Name()}, nil
		}})
	return e
}

func do(t *testing.T, h http.Handler, method, path, body string, hdr ...string) (*http.Response, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, "https://azsim.test"+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer t")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	resp := rec.Result()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp, m
}

func TestComputeStyleMergeAndCounterETags(t *testing.T) {
	e := newTestEngine(Config{})
	const rg = "/subscriptions/s/resourcegroups/g?api-version=2021-04-01"
	if r, _ := do(t, e, "PUT", rg, `{"location":"eastus"}`); r.StatusCode != 201 {
		t.Fatalf("rg create %d", r.StatusCode)
	}
	if r, _ := do(t, e, "PUT", rg, `{"location":"eastus"}`); r.StatusCode != 200 {
		t.Fatalf("rg update %d", r.StatusCode)
	}
	ss := "/subscriptions/s/resourceGroups/G/providers/microsoft.compute/virtualMachineScaleSets/SS?api-version=2025-04-01"
	r, m := do(t, e, "PUT", ss, `{"location":"eastus","properties":{"a":{"x":1,"y":[1,2]},"b":2}}`)
	if r.StatusCode != 201 || m["etag"] != `"1"` || r.Header.Get("ETag") != `"1"` {
		t.Fatalf("create %d %v", r.StatusCode, m["etag"])
	}
	if m["id"] != "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachineScaleSets/SS" {
		t.Fatalf("canonical id %v", m["id"])
	}
	if !strings.Contains(r.Header.Get("Azure-AsyncOperation"), "/providers/Microsoft.Compute/locations/eastus/operations/") {
		t.Fatalf("async header %q", r.Header.Get("Azure-AsyncOperation"))
	}
	// Partial body merges; stale If-Match is refused with CRP's body.
	r, m = do(t, e, "PUT", strings.ToLower(ss), `{"properties":{"a":{"y":[3]}}}`, "If-Match", `"1"`)
	if r.StatusCode != 200 || m["etag"] != `"2"` {
		t.Fatalf("merge %d %v", r.StatusCode, m)
	}
	a := m["properties"].(map[string]any)["a"].(map[string]any)
	if a["x"] == nil || len(a["y"].([]any)) != 1 || m["properties"].(map[string]any)["b"] == nil {
		t.Fatalf("merge result %v", m["properties"])
	}
	r, m = do(t, e, "PUT", ss, `{"properties":{}}`, "If-Match", `"1"`)
	if r.StatusCode != 412 || m["error"].(map[string]any)["code"] != "PreconditionFailed" {
		t.Fatalf("stale %d %v", r.StatusCode, m)
	}
	if r, _ := do(t, e, "PUT", ss, `{"location":"eastus"}`, "If-None-Match", "*"); r.StatusCode != 412 {
		t.Fatalf("if-none-match %d", r.StatusCode)
	}
	// PATCH merges too (status 200).
	if r, m := do(t, e, "PATCH", ss, `{"tags":{"k":"v"}}`); r.StatusCode != 200 || m["etag"] != `"3"` {
		t.Fatalf("patch %d %v", r.StatusCode, m["etag"])
	}
	// Operation status has CRP's extra fields.
	r, _ = do(t, e, "PUT", ss, `{"properties":{"b":3}}`)
	op := strings.TrimPrefix(r.Header.Get("Azure-AsyncOperation"), "https://azsim.test")
	if r, m := do(t, e, "GET", op, ""); r.StatusCode != 200 || m["status"] != "Succeeded" || m["name"] == nil || m["startTime"] == nil || m["endTime"] == nil {
		t.Fatalf("operation status %d %v", r.StatusCode, m)
	}
	// Virtual type and panics.
	if r, m := do(t, e, "GET", "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachineScaleSets/SS/virtualMachines/0?api-version=2025-04-01", ""); r.StatusCode != 200 || m["name"] != "0" {
		t.Fatalf("virtual %d", r.StatusCode)
	}
	if r, m := do(t, e, "GET", "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachineScaleSets/SS/virtualMachines/boom?api-version=2025-04-01", ""); r.StatusCode != 500 || m["error"] == nil {
		t.Fatalf("panic not recovered: %d", r.StatusCode)
	}
	// Resource group delete is a Location LRO that removes contained resources.
	r, _ = do(t, e, "DELETE", rg, "")
	if r.StatusCode != 202 || !strings.Contains(r.Header.Get("Location"), "/operationresults/") || r.Header.Get("Azure-AsyncOperation") != "" {
		t.Fatalf("rg delete %d %v", r.StatusCode, r.Header)
	}
	loc := strings.TrimPrefix(r.Header.Get("Location"), "https://azsim.test")
	if r, _ := do(t, e, "GET", loc, ""); r.StatusCode != 200 {
		t.Fatalf("operation result %d", r.StatusCode)
	}
	if got := e.ListResources("Microsoft.Compute/virtualMachineScaleSets"); len(got) != 0 {
		t.Fatalf("scale set survived its group: %d", len(got))
	}
}

func TestAuthorizeHook(t *testing.T) {
	e := newTestEngine(Config{Authorize: func(r *http.Request) error {
		if r.Header.Get("Authorization") != "Bearer good" {
			return io.EOF
		}
		return nil
	}})
	r, m := do(t, e, "GET", "/subscriptions/s/resourcegroups/g?api-version=2021-04-01", "")
	if r.StatusCode != 401 || m["error"].(map[string]any)["code"] != "InvalidAuthenticationToken" {
		t.Fatalf("got %d %v", r.StatusCode, m)
	}
	r, _ = do(t, e, "GET", "/subscriptions/s/resourcegroups/g?api-version=2021-04-01", "", "Authorization", "Bearer good")
	if r.StatusCode != 404 {
		t.Fatalf("authorized: %d", r.StatusCode)
	}
}

func TestRateLimitHeadersLeftToMiddleware(t *testing.T) {
	e := newTestEngine(Config{})
	mw := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(HeaderRemainingReads, "42")
		e.ServeHTTP(w, r)
	})
	r, _ := do(t, mw, "GET", "/subscriptions/s/resourcegroups/g?api-version=2021-04-01", "")
	if r.Header.Get(HeaderRemainingReads) != "42" {
		t.Fatalf("engine overwrote middleware header: %q", r.Header.Get(HeaderRemainingReads))
	}
	r, _ = do(t, e, "GET", "/subscriptions/s/resourcegroups/g?api-version=2021-04-01", "")
	if r.Header.Get(HeaderRemainingReads) == "" || r.Header.Get("x-ms-correlation-request-id") == "" {
		t.Fatal("default headers missing")
	}
}

// Child types without an API get ids like any child; a child with PutLRO
// LRONone answers its PUTs synchronously even when operations take time.
func TestChildWithoutAPIAndSynchronousChildPut(t *testing.T) {
	e := NewEngine(Config{LRODuration: time.Hour})
	e.Register(TypeSpec{Type: "Microsoft.Resources/resourceGroups", APIVersions: ResourcesAPIVersions, ETag: ETagNone, PutLRO: LRONone, DeleteLRO: LROLocation})
	e.Register(TypeSpec{Type: "Microsoft.Network/things", APIVersions: NetworkAPIVersions},
		TypeSpec{Type: "Microsoft.Network/things/parts", NoAPI: true},
		TypeSpec{Type: "Microsoft.Network/things/decisions", PutLRO: LRONone})
	do(t, e, "PUT", "/subscriptions/s/resourceGroups/g?api-version=2021-04-01", `{"location":"eastus"}`)
	const thing = "/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/things/t"
	r, m := do(t, e, "PUT", thing+"?api-version=2025-05-01",
		`{"location":"eastus","properties":{"parts":[{"name":"p"}],"decisions":[{"name":"d","properties":{"v":1}}]}}`)
	if r.StatusCode != 201 || r.Header.Get("Azure-AsyncOperation") == "" {
		t.Fatalf("create %d", r.StatusCode)
	}
	part := Arr(m, "properties", "parts")[0]
	if part["id"] != thing+"/parts/p" || part["type"] != "Microsoft.Network/things/parts" || part["etag"] != m["etag"] {
		t.Fatalf("part %v", part)
	}
	if r, m := do(t, e, "GET", thing+"/parts/p?api-version=2025-05-01", ""); r.StatusCode != 400 || Str(m, "error", "code") != "InvalidResourceType" {
		t.Fatalf("GET of a part: %d %v", r.StatusCode, m)
	}
	if _, ok := e.GetResource(thing + "/parts/p"); !ok {
		t.Fatal("GetResource misses the part")
	}
	r, m = do(t, e, "PUT", thing+"/decisions/d?api-version=2025-05-01", `{"properties":{"v":2}}`)
	if r.StatusCode != 200 || r.Header.Get("Azure-AsyncOperation") != "" || Str(m, "properties", "provisioningState") != "Succeeded" {
		t.Fatalf("decision PUT: %d %q %v", r.StatusCode, r.Header.Get("Azure-AsyncOperation"), m)
	}
}

func TestCanonicalType(t *testing.T) {
	e := newTestEngine(Config{})
	for in, want := range map[string]string{
		"microsoft.compute/VIRTUALMACHINESCALESETS":                 "Microsoft.Compute/virtualMachineScaleSets",
		"microsoft.Compute/virtualMachineScaleSets/virtualMachines": "Microsoft.Compute/virtualMachineScaleSets/virtualMachines",
		"microsoft.compute/locations/operations":                    "Microsoft.Compute/locations/operations",
		"Other.Namespace/things":                                    "Other.Namespace/things",
	} {
		if got := e.CanonicalType(in); got != want {
			t.Errorf("CanonicalType(%q) = %q, want %q", in, got, want)
		}
	}
}
