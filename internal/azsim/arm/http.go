package arm

import (
	"encoding/json"
	"errors"
	"net/http"
	"runtime/debug"
	"strings"
)

// Headers the engine sets unless something upstream (the throttling
// middleware) already set them on the ResponseWriter.
const (
	HeaderRemainingReads  = "x-ms-ratelimit-remaining-subscription-reads"
	HeaderRemainingWrites = "x-ms-ratelimit-remaining-subscription-writes"
)

// ServeHTTP serves the ARM API.
func (e *Engine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			// Never let bad input take the server down; answer like ARM does.
			_ = debug.Stack()
			writeError(w, Errorf(http.StatusInternalServerError, "InternalServerError",
				"Encountered internal server error: %v", v))
		}
	}()
	e.setStandardHeaders(w, r)
	if err := e.cfg.Authorize(r); err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer authorization_uri="`+e.base(r)+`", error="invalid_token", error_description="`+strings.ReplaceAll(err.Error(), `"`, `'`)+`"`)
		code := "AuthenticationFailed"
		if r.Header.Get("Authorization") != "" {
			code = "InvalidAuthenticationToken"
		}
		writeError(w, Errorf(http.StatusUnauthorized, code, "Authentication failed: %v", err))
		return
	}
	e.mu.Lock()
	routes := e.routes
	e.mu.Unlock()
	for _, rt := range routes {
		if rt.match(r) {
			rt.h.ServeHTTP(w, r)
			return
		}
	}
	if err := e.serveARM(w, r); err != nil {
		writeError(w, asARMError(err))
	}
}

func asARMError(err error) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	return Errorf(http.StatusInternalServerError, "InternalServerError", "%v", err)
}

func (e *Engine) setStandardHeaders(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("x-ms-request-id", newGUID())
	corr := r.Header.Get("x-ms-correlation-request-id")
	if corr == "" {
		corr = newGUID()
	}
	h.Set("x-ms-correlation-request-id", corr)
	if c := r.Header.Get("x-ms-client-request-id"); c != "" {
		h.Set("x-ms-client-request-id", c)
	}
	h.Set("Cache-Control", "no-cache")
	read := r.Method == http.MethodGet || r.Method == http.MethodHead
	if read && h.Get(HeaderRemainingReads) == "" {
		h.Set(HeaderRemainingReads, "11999")
	}
	if !read && h.Get(HeaderRemainingWrites) == "" {
		h.Set(HeaderRemainingWrites, "1199")
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"InternalServerError","message":"response encoding failed"}}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// WriteJSON writes v as an ARM JSON body, for handlers added with AddRoute.
func WriteJSON(w http.ResponseWriter, status int, v any) { writeJSON(w, status, v) }

// WriteError writes err as an ARM error body ({"error":{...}}); errors that are
// not *Error become 500 InternalServerError. For handlers added with AddRoute.
func WriteError(w http.ResponseWriter, err error) { writeError(w, asARMError(err)) }

func writeError(w http.ResponseWriter, e *Error) {
	status := e.Status
	if status == 0 {
		status = http.StatusInternalServerError
	}
	w.Header().Set("x-ms-failure-cause", "service")
	writeJSON(w, status, errorBody{Error: e})
}

// serveARM routes one request. It returns an error to be rendered as ARM error.
func (e *Engine) serveARM(w http.ResponseWriter, r *http.Request) error {
	path := r.URL.EscapedPath()
	segs := strings.Split(strings.Trim(path, "/"), "/")
	apiVersion := r.URL.Query().Get("api-version")

	e.mu.Lock()
	defer e.mu.Unlock()
	e.advance()

	// Operation status endpoints (no api-version check: links carry it).
	if len(segs) == 8 && strings.EqualFold(segs[0], "subscriptions") && strings.EqualFold(segs[2], "providers") &&
		strings.EqualFold(segs[4], "locations") && r.Method == http.MethodGet {
		switch strings.ToLower(segs[6]) {
		case "operations", "diskoperations":
			// CRP's Location URL is the status URL with monitor=true.
			e.serveOperation(w, r, segs[7], strings.EqualFold(r.URL.Query().Get("monitor"), "true"))
			return nil
		case "operationresults":
			e.serveOperation(w, r, segs[7], true)
			return nil
		}
	}
	if len(segs) == 4 && strings.EqualFold(segs[0], "subscriptions") && strings.EqualFold(segs[2], "operationresults") {
		e.serveOperation(w, r, segs[3], true)
		return nil
	}
	if apiVersion == "" {
		return BadRequest("MissingApiVersionParameter", "The api-version query parameter (?api-version=) is required for all requests.")
	}
	id, err := ParseID(path)
	if err != nil || len(id.Types) == 0 {
		return Errorf(http.StatusBadRequest, "InvalidRequestUri", "The request URI '%s' is not valid.", r.URL.Path)
	}
	spec := e.spec(id.FullType())
	var action *Action
	if spec == nil && id.IsCollection() && len(id.Types) >= 2 {
		// .../{type}/{name}/{action}
		parent, _ := id.Parent()
		if ps := e.spec(parent.FullType()); ps != nil {
			if a, ok := ps.Actions[strings.ToLower(id.Types[len(id.Types)-1])]; ok {
				spec, action = ps, &a
				id = parent
			}
		}
	}
	if spec != nil && spec.NoAPI {
		spec, action = nil, nil
	}
	if spec == nil {
		if !e.namespaces[strings.ToLower(id.Namespace)] {
			return BadRequest("InvalidResourceNamespace", "The resource namespace '%s' is invalid.", id.Namespace)
		}
		return BadRequest("InvalidResourceType", "The resource type '%s' could not be found in the namespace '%s' for api version '%s'.",
			strings.Join(id.Types, "/"), id.Namespace, apiVersion)
	}
	if !apiVersionAllowed(spec, apiVersion) {
		if id.Namespace == ResourceGroupsNamespace || strings.EqualFold(id.Namespace, ResourceGroupsNamespace) {
			return BadRequest("InvalidApiVersionParameter", "The api-version '%s' is invalid. The supported versions are '%s'.",
				apiVersion, strings.Join(spec.APIVersions, ","))
		}
		return BadRequest("NoRegisteredProviderFound",
			"No registered resource provider found for location '%s' and API version '%s' for type '%s'. The supported api-versions are '%s'.",
			"global", apiVersion, strings.Join(id.Types, "/"), strings.Join(spec.APIVersions, ", "))
	}
	tx := e.newTx(r)
	defer e.commit(tx)
	if action != nil {
		return e.serveAction(tx, w, r, spec, action, id, apiVersion)
	}
	if id.IsCollection() {
		if r.Method != http.MethodGet {
			return Errorf(http.StatusMethodNotAllowed, "MethodNotAllowed", "The method '%s' is not allowed on a collection.", r.Method)
		}
		return e.serveList(tx, w, r, spec, id)
	}
	if id.ResourceGroup == "" && id.Namespace != ResourceGroupsNamespace {
		return Errorf(http.StatusBadRequest, "InvalidRequestUri", "The request URI '%s' is missing the resource group.", r.URL.Path)
	}
	for i, n := range id.Names {
		if i == len(id.Names)-1 && (r.Method == http.MethodPut) && !spec.validName(n) {
			return InvalidResourceName(n)
		}
	}
	switch {
	case spec.VirtualGet != nil:
		if r.Method != http.MethodGet {
			return Errorf(http.StatusMethodNotAllowed, "MethodNotAllowed", "The method '%s' is not allowed.", r.Method)
		}
		doc, err := spec.VirtualGet(tx, id)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, doc)
		return nil
	case spec.ChildField != "":
		return e.serveChild(tx, w, r, spec, id, apiVersion)
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return e.serveGet(w, r, id)
	case http.MethodPut:
		return e.servePut(tx, w, r, spec, id, apiVersion)
	case http.MethodPatch:
		return e.servePatch(tx, w, r, spec, id, apiVersion)
	case http.MethodDelete:
		return e.serveDelete(tx, w, r, spec, id, apiVersion)
	}
	return Errorf(http.StatusMethodNotAllowed, "MethodNotAllowed", "The method '%s' is not allowed.", r.Method)
}

func apiVersionAllowed(s *TypeSpec, v string) bool {
	for _, a := range s.APIVersions {
		if strings.EqualFold(a, v) {
			return true
		}
	}
	return false
}

// canonicalize gives an incoming ID the registered casing for namespace and
// types; names keep the caller's casing (first create wins). The resource
// group name takes the stored group's casing when it exists.
func (e *Engine) canonicalize(id ResourceID, spec *TypeSpec) ResourceID {
	parts := strings.Split(spec.Type, "/")
	c := id
	c.Namespace = parts[0]
	c.Types = append([]string(nil), parts[1:]...)
	c.Names = append([]string(nil), id.Names...)
	if rg, ok := id.ResourceGroupID(); ok {
		if g := e.res[rg.Key()]; g != nil {
			c.ResourceGroup = g.ID.Name()
		}
	}
	// Parent names take the stored parent's casing.
	if p, ok := c.Parent(); ok {
		if pr := e.res[p.Key()]; pr != nil {
			copy(c.Names, pr.ID.Names)
		}
	}
	return c
}
