package arm

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

type opKind int

const (
	opPut opKind = iota
	opDelete
	opAction
)

func (k opKind) String() string {
	switch k {
	case opPut:
		return "PUT"
	case opDelete:
		return "DELETE"
	default:
		return "POST"
	}
}

// operation is one long-running operation.
type operation struct {
	ID          string
	Sub         string
	Namespace   string
	Location    string
	ResourceKey string
	Kind        opKind
	APIVersion  string
	Start, Due  time.Time
	End         time.Time
	Status      string // InProgress, Succeeded, Failed, Canceled
	Err         *Error
	Fail        *Error // set when the op is scripted to fail
	Extras      bool   // CRP-style status body
	Create      bool   // the PUT created the resource
	Polling     PollingStyle
	P           string // CRP's p= polling parameter
}

// LROInfo describes an operation to failure rules.
type LROInfo struct {
	Method     string // PUT, DELETE, POST
	ResourceID string // canonical ID of the target (the parent for child writes)
	Type       string // canonical full type of the target
}

type failRule struct {
	match func(LROInfo) bool
	err   *Error
}

// FailNextLRO makes the next operation for which match returns true end
// Failed with err (code/message; Status is ignored). match nil matches any
// operation. Each call arms one failure. This is the fault injector's hook.
func (e *Engine) FailNextLRO(match func(LROInfo) bool, err *Error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fails = append(e.fails, failRule{match: match, err: err})
}

// LROOptions override LRO behaviour for one request (set by middleware via WithLROOptions).
type LROOptions struct {
	// Duration overrides Config.LRODuration when non-nil.
	Duration *time.Duration
	// Fail makes the request's operation end Failed with this error.
	Fail *Error
}

type lroCtxKey struct{}

// WithLROOptions attaches per-request LRO overrides to a context; middleware
// wraps r.WithContext(arm.WithLROOptions(r.Context(), opts)) before the engine.
func WithLROOptions(ctx context.Context, o LROOptions) context.Context {
	return context.WithValue(ctx, lroCtxKey{}, o)
}

func lroOptions(r *http.Request) LROOptions {
	if r == nil {
		return LROOptions{}
	}
	o, _ := r.Context().Value(lroCtxKey{}).(LROOptions)
	return o
}

// startOp creates an operation for a write on resource r. The returned op is
// already complete when the duration is 0 (the caller applies the effect).
func (e *Engine) startOp(req *http.Request, kind opKind, r *resource, apiVersion string) *operation {
	now := e.now()
	d := e.cfg.LRODuration
	o := lroOptions(req)
	if o.Duration != nil {
		d = *o.Duration
	}
	op := &operation{
		ID: newGUID(), Sub: r.ID.Subscription, Namespace: namespaceOf(r.Spec.Type),
		Location: locationOf(e, r), ResourceKey: r.key, Kind: kind, APIVersion: apiVersion,
		Start: now, Due: now.Add(d), Status: "InProgress", Fail: o.Fail, Extras: r.Spec.OperationStatusExtras,
		Polling: r.Spec.Polling,
	}
	if op.Polling != PollingNRP {
		op.P = newGUID()
	}
	if op.Fail == nil {
		info := LROInfo{Method: kind.String(), ResourceID: r.ID.String(), Type: r.Spec.Type}
		for i, f := range e.fails {
			if f.match == nil || f.match(info) {
				op.Fail = f.err
				e.fails = append(e.fails[:i], e.fails[i+1:]...)
				break
			}
		}
	}
	// A new write supersedes an in-flight one on the same resource, as NRP does.
	for _, other := range e.ops {
		if other.ResourceKey == op.ResourceKey && other.Status == "InProgress" && other.Kind != opDelete {
			other.Status, other.End = "Canceled", now
			other.Err = &Error{Code: "CanceledAndSupersededDueToAnotherOperation",
				Message: "Operation was canceled and superseded by a newer operation on the same resource."}
		}
	}
	e.ops[op.ID] = op
	e.opSeq = append(e.opSeq, op.ID)
	if len(e.opSeq) > 20000 {
		for _, id := range e.opSeq[:10000] {
			delete(e.ops, id)
		}
		e.opSeq = append([]string(nil), e.opSeq[10000:]...)
	}
	return op
}

func namespaceOf(typ string) string { return typ[:strings.Index(typ, "/")] }

func locationOf(e *Engine, r *resource) string {
	if l := Str(r.Doc, "location"); l != "" {
		return strings.ToLower(strings.ReplaceAll(l, " ", ""))
	}
	if rg, ok := r.ID.ResourceGroupID(); ok {
		if g := e.res[rg.Key()]; g != nil {
			if l := Str(g.Doc, "location"); l != "" {
				return strings.ToLower(l)
			}
		}
	}
	return "global"
}

// advance completes every operation that is due. Called under the lock at the
// start of every request, so no background goroutine is needed.
func (e *Engine) advance() {
	now := e.now()
	var tx *Tx
	for _, id := range e.opSeq {
		op := e.ops[id]
		if op == nil || op.Status != "InProgress" || now.Before(op.Due) {
			continue
		}
		if tx == nil {
			tx = e.newTx(nil)
		}
		e.complete(tx, op)
	}
	if tx != nil {
		e.commit(tx)
	}
}

// complete applies the end of an operation to the store.
func (e *Engine) complete(tx *Tx, op *operation) {
	op.End = e.now()
	r := e.res[op.ResourceKey]
	if op.Fail != nil {
		op.Status, op.Err = "Failed", op.Fail
		if r != nil {
			setProvisioningState(r.Doc, "Failed")
			e.fillChildren(r)
			tx.changed[op.ResourceKey] = true
		}
		return
	}
	op.Status = "Succeeded"
	if r == nil {
		return
	}
	switch op.Kind {
	case opDelete:
		e.remove(tx, r)
	default:
		setProvisioningState(r.Doc, "Succeeded")
		if op.Create && r.Spec.RenewETagWhenCreated {
			e.finish(r)
		} else {
			e.fillChildren(r)
		}
		tx.changed[op.ResourceKey] = true
	}
}

// base returns the base URL for links.
func (e *Engine) base(r *http.Request) string {
	if e.cfg.BaseURL != nil {
		return strings.TrimRight(e.cfg.BaseURL(), "/")
	}
	scheme := "https"
	if r.TLS == nil {
		scheme = "http"
	}
	return scheme + "://" + r.Host
}

func (e *Engine) asyncURL(r *http.Request, op *operation) string {
	switch op.Polling {
	case PollingCRP, PollingCRPDisks:
		return e.base(r) + e.crpOperationPath(op) + "?p=" + op.P + "&api-version=" + url.QueryEscape(op.APIVersion)
	}
	return e.base(r) + "/subscriptions/" + op.Sub + "/providers/" + op.Namespace + "/locations/" + op.Location +
		"/operations/" + op.ID + "?api-version=" + url.QueryEscape(op.APIVersion)
}

func (e *Engine) locationURL(r *http.Request, op *operation) string {
	switch {
	case op.Namespace == ResourceGroupsNamespace:
		return e.base(r) + "/subscriptions/" + op.Sub + "/operationresults/" + op.ID + "?api-version=" + url.QueryEscape(op.APIVersion)
	case op.Polling == PollingCRP || op.Polling == PollingCRPDisks:
		// CRP's Location is its status URL with monitor=true, which answers like operationResults.
		return e.base(r) + e.crpOperationPath(op) + "?monitor=true&p=" + op.P + "&api-version=" + url.QueryEscape(op.APIVersion)
	}
	return e.base(r) + "/subscriptions/" + op.Sub + "/providers/" + op.Namespace + "/locations/" + op.Location +
		"/operationResults/" + op.ID + "?api-version=" + url.QueryEscape(op.APIVersion)
}

func (e *Engine) crpOperationPath(op *operation) string {
	seg := "operations"
	if op.Polling == PollingCRPDisks {
		seg = "DiskOperations"
	}
	return "/subscriptions/" + op.Sub + "/providers/" + op.Namespace + "/locations/" + op.Location + "/" + seg + "/" + op.ID
}

// setPollHeaders writes the polling headers for an operation.
func (e *Engine) setPollHeaders(w http.ResponseWriter, r *http.Request, op *operation, style LROStyle, withLocation bool) {
	switch style {
	case LROAsync:
		w.Header().Set("Azure-AsyncOperation", e.asyncURL(r, op))
		if withLocation || op.Polling == PollingCRPDisks {
			w.Header().Set("Location", e.locationURL(r, op))
		}
	case LROLocation:
		w.Header().Set("Location", e.locationURL(r, op))
	}
	if op.Status == "InProgress" && e.cfg.PollRetryAfter > 0 {
		w.Header().Set("retry-after-ms", strconv.FormatInt(e.cfg.PollRetryAfter.Milliseconds(), 10))
	}
}

// serveOperation answers .../operations/{id} (status body) and
// .../operationResults/{id} (202 while running, then 200/204 or the error).
func (e *Engine) serveOperation(w http.ResponseWriter, r *http.Request, opID string, results bool) {
	op := e.ops[opID]
	if op == nil {
		writeError(w, Errorf(http.StatusNotFound, "OperationNotFound", "The operation '%s' could not be found.", opID))
		return
	}
	if op.Status == "InProgress" && e.cfg.PollRetryAfter > 0 {
		w.Header().Set("retry-after-ms", strconv.FormatInt(e.cfg.PollRetryAfter.Milliseconds(), 10))
	}
	if results {
		switch op.Status {
		case "InProgress":
			w.Header().Set("Location", e.locationURL(r, op))
			w.WriteHeader(http.StatusAccepted)
		case "Succeeded":
			if res := e.res[op.ResourceKey]; res != nil && op.Kind != opDelete {
				writeJSON(w, http.StatusOK, publicDoc(res.Doc))
				return
			}
			if op.Namespace == ResourceGroupsNamespace {
				w.WriteHeader(http.StatusOK) // as ARM answers a finished group deletion
				return
			}
			w.WriteHeader(http.StatusNoContent)
		default:
			err := *op.Err
			if err.Status == 0 {
				err.Status = http.StatusInternalServerError
			}
			writeError(w, &err)
		}
		return
	}
	body := map[string]any{"status": op.Status}
	if op.Err != nil {
		body["error"] = map[string]any{"code": op.Err.Code, "message": op.Err.Message}
	}
	if op.Extras {
		body["name"] = op.ID
		body["startTime"] = op.Start.UTC().Format(time.RFC3339Nano)
		if op.Status != "InProgress" {
			body["endTime"] = op.End.UTC().Format(time.RFC3339Nano)
		}
	}
	writeJSON(w, http.StatusOK, body)
}
