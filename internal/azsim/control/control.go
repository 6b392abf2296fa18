// Package control is azsim's control API under /azsim/v1/ on the HTTPS listener: seeding,
// reset, fault rules, latency and throttling models, request counters and metrics, the logins
// (tokens issued by login method and identity), resource
// reads, the IMDS default VM, VM actions and private endpoint connection decisions. It needs no authentication: it is for tests and
// operators of a local emulator.
package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/azure-ccm/azure-ccm/internal/azsim/drift"
	"github.com/azure-ccm/azure-ccm/internal/azsim/identity"
	"github.com/azure-ccm/azure-ccm/internal/azsim/middleware"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
)

// Prefix is the path prefix of the control API.
const Prefix = "/azsim/v1/"

// Engine is what the control API needs of the ARM engine.
type Engine interface {
	GetResource(id string) ([]byte, bool)
	ListResources(resourceType string) [][]byte
}

// Info describes a running azsim.
type Info struct {
	URL            string `json:"url"`
	IMDSURL        string `json:"imdsURL,omitempty"`
	CAFile         string `json:"caFile,omitempty"`
	SubscriptionID string `json:"subscriptionId"`
	TenantID       string `json:"tenantId"`
	Location       string `json:"location"`
}

// VMAction is a request to act on a VM or scale set instance.
type VMAction struct {
	// ID is the resource ID of a VM or scale set instance.
	ID string `json:"id"`
	// Action is delete, deallocate, powerOff, start or restart.
	Action string `json:"action"`
}

// ConnectionAction is a private link service owner's decision on a private endpoint
// connection, applied through the ARM API in-process (no request counters).
type ConnectionAction struct {
	// ID is the connection's resource ID:
	// …/privateLinkServices/{service}/privateEndpointConnections/{name}.
	ID string `json:"id"`
	// Action is approve, reject or remove.
	Action string `json:"action"`
	// Description is the reason shown on the connection (approve, reject).
	Description string `json:"description,omitempty"`
}

// DefaultVM is the IMDS default VM document.
type DefaultVM struct {
	VM string `json:"vm"`
}

// API serves the control endpoints. Every field must be set.
type API struct {
	Engine     Engine
	Middleware *middleware.Middleware
	// Seed builds a topology; Reset drops all state (resources, faults, counters).
	Seed  func(ctx context.Context, t *topology.Topology) (*topology.Result, error)
	Reset func() error
	// VMAction performs an action through the ARM engine.
	VMAction func(ctx context.Context, a VMAction) error
	// ConnectionAction approves, rejects or removes a private endpoint connection.
	ConnectionAction func(ctx context.Context, a ConnectionAction) error
	// Drift applies a third party's edit through the ARM engine (package drift).
	Drift        func(ctx context.Context, r drift.Request) (drift.Result, error)
	SetDefaultVM func(string)
	DefaultVM    func() string
	Info         func() Info
	// Logins are the tokens the identity service issued, by login method and client ID;
	// ResetLogins forgets them.
	Logins      func() []identity.LoginCount
	ResetLogins func()
}

// Register adds the routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	p := strings.TrimSuffix(Prefix, "/")
	mux.HandleFunc("GET "+p+"/info", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, a.Info()) })
	mux.HandleFunc("POST "+p+"/seed", a.seed)
	mux.HandleFunc("POST "+p+"/reset", func(w http.ResponseWriter, r *http.Request) {
		if err := a.Reset(); err != nil {
			writeErr(w, http.StatusInternalServerError, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET "+p+"/faults", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, a.Middleware.Faults())
	})
	mux.HandleFunc("POST "+p+"/faults", a.addFault)
	mux.HandleFunc("DELETE "+p+"/faults", func(w http.ResponseWriter, r *http.Request) {
		a.Middleware.ClearFaults()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("DELETE "+p+"/faults/{id}", func(w http.ResponseWriter, r *http.Request) {
		if !a.Middleware.RemoveFault(r.PathValue("id")) {
			writeErr(w, http.StatusNotFound, fmt.Errorf("no fault %q", r.PathValue("id")))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET "+p+"/latency", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, a.Middleware.Latency())
	})
	mux.HandleFunc("PUT "+p+"/latency", func(w http.ResponseWriter, r *http.Request) {
		var m middleware.LatencyModel
		if !readJSON(w, r, &m) {
			return
		}
		a.Middleware.SetLatency(m)
		writeJSON(w, http.StatusOK, m)
	})
	mux.HandleFunc("GET "+p+"/throttle", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, a.Middleware.Throttle())
	})
	mux.HandleFunc("PUT "+p+"/throttle", func(w http.ResponseWriter, r *http.Request) {
		m := middleware.DefaultThrottle()
		if !readJSON(w, r, &m) {
			return
		}
		a.Middleware.SetThrottle(m)
		writeJSON(w, http.StatusOK, m)
	})
	mux.HandleFunc("GET "+p+"/stats", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, a.Middleware.Stats())
	})
	mux.HandleFunc("DELETE "+p+"/stats", func(w http.ResponseWriter, r *http.Request) {
		a.Middleware.ResetStats()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET "+p+"/logins", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, a.Logins())
	})
	mux.HandleFunc("DELETE "+p+"/logins", func(w http.ResponseWriter, r *http.Request) {
		a.ResetLogins()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.Handle("GET "+p+"/metrics", a.Middleware.MetricsHandler())
	mux.HandleFunc("GET "+p+"/resource", a.getResource)
	mux.HandleFunc("GET "+p+"/resources", a.listResources)
	mux.HandleFunc("GET "+p+"/imds/default-vm", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, DefaultVM{VM: a.DefaultVM()})
	})
	mux.HandleFunc("PUT "+p+"/imds/default-vm", func(w http.ResponseWriter, r *http.Request) {
		var d DefaultVM
		if !readJSON(w, r, &d) {
			return
		}
		a.SetDefaultVM(d.VM)
		writeJSON(w, http.StatusOK, d)
	})
	mux.HandleFunc("POST "+p+"/vm-action", func(w http.ResponseWriter, r *http.Request) {
		var act VMAction
		if !readJSON(w, r, &act) {
			return
		}
		if err := a.VMAction(r.Context(), act); err != nil {
			writeErr(w, http.StatusBadRequest, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST "+p+"/private-endpoint-connection", func(w http.ResponseWriter, r *http.Request) {
		var act ConnectionAction
		if !readJSON(w, r, &act) {
			return
		}
		if err := a.ConnectionAction(r.Context(), act); err != nil {
			writeErr(w, http.StatusBadRequest, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST "+p+"/drift", func(w http.ResponseWriter, r *http.Request) {
		var req drift.Request
		if !readJSON(w, r, &req) {
			return
		}
		res, err := a.Drift(r.Context(), req)
		if err != nil {
			writeErr(w, http.StatusBadRequest, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
	})
}

func (a *API) seed(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		writeErr(w, http.StatusBadRequest, err)
		return
	}
	t, err := topology.Parse(body)
	if err != nil {
		writeErr(w, http.StatusBadRequest, err)
		return
	}
	res, err := a.Seed(r.Context(), t)
	if err != nil {
		writeErr(w, http.StatusBadRequest, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (a *API) addFault(w http.ResponseWriter, r *http.Request) {
	var f middleware.Fault
	if !readJSON(w, r, &f) {
		return
	}
	got, err := a.Middleware.AddFault(f)
	if err != nil {
		writeErr(w, http.StatusBadRequest, err)
		return
	}
	writeJSON(w, http.StatusCreated, got)
}

func (a *API) getResource(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if id == "" {
		writeErr(w, http.StatusBadRequest, errors.New("query parameter id is required"))
		return
	}
	b, ok := a.Engine.GetResource(id)
	if !ok {
		writeErr(w, http.StatusNotFound, fmt.Errorf("resource %s not found", id))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b) //nolint:gosec // G705: a JSON document served as application/json, never HTML
}

func (a *API) listResources(w http.ResponseWriter, r *http.Request) {
	typ := r.URL.Query().Get("type")
	if typ == "" {
		writeErr(w, http.StatusBadRequest, errors.New("query parameter type is required, e.g. Microsoft.Network/loadBalancers"))
		return
	}
	items := a.Engine.ListResources(typ)
	out := make([]json.RawMessage, 0, len(items))
	for _, b := range items {
		out = append(out, b)
	}
	writeJSON(w, http.StatusOK, map[string]any{"value": out})
}

// Error is the control API's error body.
type Error struct {
	Error string `json:"error"`
}

func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, 4<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeErr(w, http.StatusBadRequest, fmt.Errorf("bad request body: %w", err))
		return false
	}
	return true
}

func writeErr(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, Error{Error: err.Error()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
