package control_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/compute"
	"github.com/azure-ccm/azure-ccm/internal/azsim/control"
	"github.com/azure-ccm/azure-ccm/internal/azsim/identity"
	"github.com/azure-ccm/azure-ccm/internal/azsim/middleware"
	"github.com/azure-ccm/azure-ccm/internal/azsim/network"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
)

// FuzzControlAPI: any request to the control API is answered without a server error or a panic,
// and the models it accepts read back as JSON.
func FuzzControlAPI(f *testing.F) {
	e := arm.NewEngine(arm.Config{})
	network.Register(e)
	compute.Register(e)
	mw := middleware.New(e, middleware.Options{})
	api := &control.API{Engine: e, Middleware: mw,
		// Seeding itself is fuzzed by topology's FuzzParseNormalizePlan: here it only normalises.
		Seed: func(_ context.Context, t *topology.Topology) (*topology.Result, error) {
			if _, err := t.Normalize(); err != nil {
				return nil, err
			}
			return &topology.Result{}, nil
		},
		Reset:        func() error { return nil },
		VMAction:     func(context.Context, control.VMAction) error { return errors.New("no such VM") },
		SetDefaultVM: func(string) {}, DefaultVM: func() string { return "" },
		Info:   func() control.Info { return control.Info{URL: "https://azsim"} },
		Logins: func() []identity.LoginCount { return nil }, ResetLogins: func() {},
	}
	mux := http.NewServeMux()
	api.Register(mux)
	for _, s := range [][3]string{
		{"POST", "/azsim/v1/faults", `{"kind":"status","status":429,"retryAfterSeconds":5,"resourceType":"loadBalancers","method":"PUT","rate":0.5}`},
		{"PUT", "/azsim/v1/latency", `{"default":{"median":"50ms","p99":"1s"}}`},
		{"PUT", "/azsim/v1/throttle", `{"enabled":true,"reads":{"capacity":-1,"refillPerSecond":1e308}}`},
		{"POST", "/azsim/v1/seed", `{"resourceGroups":[{"name":"rg"}],"scaleSets":[{"resourceGroup":"rg","name":"ss","capacity":2}]}`},
		{"GET", "/azsim/v1/resource", ""}, {"GET", "/azsim/v1/resources?type=Microsoft.Network/loadBalancers", ""},
		{"POST", "/azsim/v1/vm-action", `{"id":"x","action":"start"}`}, {"DELETE", "/azsim/v1/faults/zzz", ""},
		{"PUT", "/azsim/v1/imds/default-vm", `{"vm":1}`},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, method, path, body string) {
		if !validMethod(method) {
			return
		}
		u, err := url.Parse(path)
		// A request line cannot carry whitespace or control characters: no client can send
		// such a target, and httptest.NewRequest panics on it.
		if err != nil || !strings.HasPrefix(u.Path, "/azsim/v1/") || strings.IndexFunc(u.RequestURI(), func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
			return
		}
		req := httptest.NewRequest(method, "https://azsim"+u.RequestURI(), strings.NewReader(body))
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s %q: HTTP %d %s", method, path, body, rec.Code, rec.Body)
		}
		for _, model := range []string{"/azsim/v1/latency", "/azsim/v1/throttle", "/azsim/v1/faults", "/azsim/v1/stats"} {
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "https://azsim"+model, nil))
			if rec.Code != http.StatusOK || !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("after %s %s %q: GET %s: HTTP %d %s", method, path, body, model, rec.Code, rec.Body)
			}
		}
	})
}

func validMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch:
		return true
	}
	return false
}
