package arm

import (
	"net/http"
	"strings"
)

// checkPreconditions applies If-Match / If-None-Match against the current
// etag ("" when the resource does not exist).
func checkPreconditions(r *http.Request, exists bool, etag, id string, style ETagStyle) error {
	if im := r.Header.Get("If-Match"); im != "" {
		if !exists {
			return Errorf(http.StatusPreconditionFailed, "PreconditionFailed", "The resource %s does not exist, but If-Match was specified.", id)
		}
		if im != "*" && !etagMatch(im, etag) {
			if style == ETagCounter {
				return Errorf(http.StatusPreconditionFailed, "PreconditionFailed",
					"Etag provided in if-match header %s does not match etag %s of resource.", im, etag)
			}
			shown := im
			if !strings.HasPrefix(im, `W/"`) {
				shown = `W/"` + strings.Trim(im, `"`) + `"`
			}
			return &Error{Status: http.StatusPreconditionFailed, Code: "PreconditionFailed", Message: "Precondition failed.",
				Details: []ErrorDetail{{Code: "PreconditionFailedEtagMismatch",
					Message: "Etag provided in if-match header " + shown + " does not match etag " + etag + " of resource " + id + " in NRP data store."}}}
		}
	}
	if inm := r.Header.Get("If-None-Match"); inm != "" && exists {
		if inm == "*" || etagMatch(inm, etag) {
			return Errorf(http.StatusPreconditionFailed, "PreconditionFailed",
				"The resource %s already exists and If-None-Match was specified.", id)
		}
	}
	return nil
}

// etagMatch compares etags loosely: W/ prefixes and quotes are ignored so that
// clients echoing either form match.
func etagMatch(a, b string) bool {
	norm := func(s string) string {
		s = strings.TrimSpace(s)
		s = strings.TrimPrefix(s, "W/")
		return strings.Trim(s, `"`)
	}
	for _, part := range strings.Split(a, ",") {
		if norm(part) == norm(b) {
			return true
		}
	}
	return false
}

func (e *Engine) serveGet(w http.ResponseWriter, r *http.Request, id ResourceID) error {
	res := e.res[id.Key()]
	if res == nil {
		if r.Method == http.MethodHead {
			w.WriteHeader(http.StatusNotFound)
			return nil
		}
		if err := e.requireGroup(id); err != nil {
			return err
		}
		return NotFoundTopLevel(id)
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if et, _ := res.Doc["etag"].(string); et != "" {
		w.Header().Set("ETag", et)
	}
	writeJSON(w, http.StatusOK, publicDoc(res.Doc))
	return nil
}

// requireGroup checks that the resource group of id exists.
func (e *Engine) requireGroup(id ResourceID) error {
	rg, ok := id.ResourceGroupID()
	if !ok {
		return nil
	}
	if e.res[rg.Key()] == nil {
		return ResourceGroupNotFound(id.ResourceGroup)
	}
	return nil
}

func (e *Engine) servePut(tx *Tx, w http.ResponseWriter, r *http.Request, spec *TypeSpec, id ResourceID, apiVersion string) error {
	body, err := e.readBody(r)
	if err != nil {
		return err
	}
	if body == nil {
		return BadRequest("InvalidRequestContent", "The request content was invalid and could not be deserialized: the body is empty.")
	}
	if err := e.requireGroup(id); err != nil {
		return err
	}
	old := e.res[id.Key()]
	var oldDoc map[string]any
	etag := ""
	if old != nil {
		oldDoc = old.Doc
		etag, _ = old.Doc["etag"].(string)
	}
	if err := checkPreconditions(r, old != nil, etag, id.String(), spec.ETag); err != nil {
		return err
	}
	return e.write(tx, w, r, spec, id, apiVersion, oldDoc, body, http.MethodPut, nil)
}

// write stores a new version of a top-level resource: merge/replace, Prepare,
// provisioning state, etag, LRO, response.
func (e *Engine) write(tx *Tx, w http.ResponseWriter, r *http.Request, spec *TypeSpec, id ResourceID, apiVersion string,
	oldDoc, body map[string]any, method string, child *ResourceID) error {
	old := e.res[id.Key()]
	cid := e.canonicalize(id, spec)
	if old != nil {
		cid = old.ID
	}
	var doc map[string]any
	if old != nil && (spec.Put == PutMerge || method == http.MethodPatch) && child == nil {
		doc = DeepMerge(CopyDoc(old.Doc), body)
	} else {
		doc = body
	}
	delete(doc, "etag")
	doc["id"], doc["name"], doc["type"] = cid.String(), cid.Name(), spec.Type
	if !spec.NoLocation {
		if Str(doc, "location") == "" {
			if old != nil && Str(old.Doc, "location") != "" {
				doc["location"] = old.Doc["location"]
			} else {
				return BadRequest("LocationRequired", "The location property is required for this definition.")
			}
		}
	}
	wr := &Write{ID: cid, Doc: doc, Old: oldDoc, Method: method, Request: r, Child: child}
	if spec.Prepare != nil {
		if err := spec.Prepare(tx, wr); err != nil {
			return err
		}
	}
	doc = wr.Doc
	res := newResource(cid, e.spec(spec.Type), doc)
	if old != nil {
		res.Counter = old.Counter
	}
	e.putRes(res)
	tx.changed[res.key] = true

	style := spec.PutLRO
	if child != nil {
		if cs := e.spec(child.FullType()); cs != nil && cs.PutLRO == LRONone {
			style = LRONone
		}
	}
	var op *operation
	if style != LRONone {
		op = e.startOp(r, opPut, res, apiVersion)
		op.Create = old == nil
	}
	state := "Succeeded"
	if op != nil && (op.Due.After(e.now()) || op.Fail != nil) {
		if old == nil {
			state = spec.creatingState()
		} else {
			state = "Updating"
		}
	}
	keep := old != nil && child == nil && spec.KeepETag != nil && spec.KeepETag(oldDoc, doc)
	setProvisioningState(doc, state)
	if keep {
		if et, ok := oldDoc["etag"]; ok {
			doc["etag"] = et
		}
		e.fillChildren(res)
	} else {
		e.finish(res)
	}
	// The answer carries the etag of the write itself, even when an instant operation
	// completes (and may renew it) right away: the client sees what a real create answers.
	answerETag, _ := doc["etag"].(string)
	if op != nil && !op.Due.After(e.now()) {
		e.complete(tx, op)
	}
	status := spec.updateStatus()
	if old == nil {
		status = spec.createStatus()
	}
	if child != nil {
		// Child writes answer with the child element.
		cs := e.spec(child.FullType())
		if oldDoc != nil && childIn(oldDoc, cs, child.Name()) {
			status = cs.updateStatus()
		} else {
			status = cs.createStatus()
		}
	}
	respDoc := doc
	if child != nil {
		cs := e.spec(child.FullType())
		items := Arr(doc, "properties", cs.ChildField)
		i := FindByName(items, child.Name())
		if i < 0 {
			return NotFoundChild(child.String())
		}
		respDoc = items[i]
	}
	if op != nil && op.Status != "InProgress" && op.Fail != nil {
		// The stored state says Failed; the initial answer must still look
		// in-flight so that the client polls and sees the failure.
		respDoc = CopyDoc(respDoc)
		setProvisioningState(respDoc, "Updating")
	}
	if et, _ := respDoc["etag"].(string); child == nil && et != answerETag {
		respDoc = CopyDoc(respDoc)
		respDoc["etag"] = answerETag
	}
	if op != nil && !(old != nil && child == nil && spec.UpdatePollsResource) {
		e.setPollHeaders(w, r, op, style, false)
	}
	// CRP sends the etag as a header on writes too; NRP only in the body.
	if et, _ := respDoc["etag"].(string); et != "" && spec.ETag == ETagCounter {
		w.Header().Set("ETag", et)
	}
	writeJSON(w, status, publicDoc(respDoc))
	return nil
}

func childIn(parent map[string]any, cs *TypeSpec, name string) bool {
	return FindByName(Arr(parent, "properties", cs.ChildField), name) >= 0
}

func (e *Engine) servePatch(tx *Tx, w http.ResponseWriter, r *http.Request, spec *TypeSpec, id ResourceID, apiVersion string) error {
	if spec.Patch == PatchUnsupported {
		return Errorf(http.StatusMethodNotAllowed, "MethodNotAllowed", "PATCH is not supported for %s.", spec.Type)
	}
	body, err := e.readBody(r)
	if err != nil {
		return err
	}
	if body == nil {
		body = map[string]any{}
	}
	old := e.res[id.Key()]
	if old == nil {
		return NotFoundTopLevel(id)
	}
	etag, _ := old.Doc["etag"].(string)
	if err := checkPreconditions(r, true, etag, old.ID.String(), spec.ETag); err != nil {
		return err
	}
	if spec.Patch == PatchMerge {
		s := *spec
		s.CreateStatus, s.UpdateStatus = http.StatusOK, http.StatusOK
		return e.write(tx, w, r, &s, id, apiVersion, old.Doc, body, http.MethodPatch, nil)
	}
	// Tags only, synchronous.
	tags, ok := body["tags"]
	if !ok {
		tags = map[string]any{}
	}
	if _, isObj := tags.(map[string]any); !isObj && tags != nil {
		return BadRequest("InvalidRequestFormat", "Cannot parse the request: tags must be an object.")
	}
	old.Doc["tags"] = tags
	e.finish(old)
	tx.changed[old.ID.Key()] = true
	if spec.ETag == ETagCounter {
		w.Header().Set("ETag", Str(old.Doc, "etag"))
	}
	writeJSON(w, http.StatusOK, publicDoc(old.Doc))
	return nil
}

func (e *Engine) serveDelete(tx *Tx, w http.ResponseWriter, r *http.Request, spec *TypeSpec, id ResourceID, apiVersion string) error {
	res := e.res[id.Key()]
	if res == nil {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	etag, _ := res.Doc["etag"].(string)
	if err := checkPreconditions(r, true, etag, res.ID.String(), spec.ETag); err != nil {
		return err
	}
	if spec.BeforeDelete != nil {
		if err := spec.BeforeDelete(tx, res.ID, res.Doc); err != nil {
			return err
		}
	}
	if spec.DeleteLRO == LRONone {
		e.remove(tx, res)
		w.WriteHeader(spec.deleteStatus())
		return nil
	}
	op := e.startOp(r, opDelete, res, apiVersion)
	if op.Due.After(e.now()) {
		setProvisioningState(res.Doc, "Deleting")
		e.fillChildren(res)
	} else {
		e.complete(tx, op)
	}
	e.setPollHeaders(w, r, op, spec.DeleteLRO, true)
	w.WriteHeader(spec.deleteStatus())
	return nil
}

// serveChild handles GET/PUT/DELETE on a child resource (.../subnets/{name})
// by editing the parent's document.
func (e *Engine) serveChild(tx *Tx, w http.ResponseWriter, r *http.Request, cs *TypeSpec, id ResourceID, apiVersion string) error {
	pid, _ := id.Parent()
	ps := e.spec(pid.FullType())
	parent := e.res[pid.Key()]
	if parent == nil {
		if r.Method == http.MethodDelete {
			w.WriteHeader(http.StatusNoContent)
			return nil
		}
		if err := e.requireGroup(pid); err != nil {
			return err
		}
		return NotFoundTopLevel(pid)
	}
	items := Arr(parent.Doc, "properties", cs.ChildField)
	idx := FindByName(items, id.Name())
	childID := parent.ID.Child(cs.Type[strings.LastIndex(cs.Type, "/")+1:], id.Name())
	if idx >= 0 {
		childID = parent.ID.Child(cs.Type[strings.LastIndex(cs.Type, "/")+1:], Str(items[idx], "name"))
	}
	etag, _ := parent.Doc["etag"].(string)
	switch r.Method {
	case http.MethodGet:
		if idx < 0 {
			return NotFoundChild(childID.String())
		}
		if etag != "" {
			w.Header().Set("ETag", etag)
		}
		writeJSON(w, http.StatusOK, items[idx])
		return nil
	case http.MethodPut:
		body, err := e.readBody(r)
		if err != nil {
			return err
		}
		if body == nil {
			return BadRequest("InvalidRequestContent", "The request content was invalid and could not be deserialized: the body is empty.")
		}
		if err := checkPreconditions(r, idx >= 0, etag, childID.String(), cs.ETag); err != nil {
			return err
		}
		for _, k := range []string{"etag", "id", "type"} {
			delete(body, k)
		}
		body["name"] = childID.Name()
		doc := CopyDoc(parent.Doc)
		list := Arr(doc, "properties", cs.ChildField)
		if idx >= 0 {
			list[idx] = body
		} else {
			list = append(list, body)
		}
		SetArr(doc, list, "properties", cs.ChildField)
		return e.write(tx, w, r, ps, parent.ID, apiVersion, parent.Doc, doc, http.MethodPut, &childID)
	case http.MethodDelete:
		if idx < 0 {
			w.WriteHeader(http.StatusNoContent)
			return nil
		}
		if err := checkPreconditions(r, true, etag, childID.String(), cs.ETag); err != nil {
			return err
		}
		doc := CopyDoc(parent.Doc)
		list := Arr(doc, "properties", cs.ChildField)
		list = append(list[:idx], list[idx+1:]...)
		SetArr(doc, list, "properties", cs.ChildField)
		wr := &Write{ID: parent.ID, Doc: doc, Old: parent.Doc, Method: http.MethodDelete, Request: r, Child: &childID}
		if ps.Prepare != nil {
			if err := ps.Prepare(tx, wr); err != nil {
				return err
			}
		}
		parent.Doc = wr.Doc
		tx.changed[parent.ID.Key()] = true
		op := e.startOp(r, opPut, parent, apiVersion)
		setProvisioningState(parent.Doc, "Updating")
		e.finish(parent)
		if !op.Due.After(e.now()) {
			e.complete(tx, op)
		}
		e.setPollHeaders(w, r, op, LROAsync, true)
		w.WriteHeader(cs.deleteStatus())
		return nil
	}
	return Errorf(http.StatusMethodNotAllowed, "MethodNotAllowed", "The method '%s' is not allowed.", r.Method)
}

func (e *Engine) serveAction(tx *Tx, w http.ResponseWriter, r *http.Request, spec *TypeSpec, a *Action, id ResourceID, apiVersion string) error {
	methods := a.Methods
	if len(methods) == 0 {
		methods = []string{http.MethodPost}
	}
	allowed := false
	for _, m := range methods {
		allowed = allowed || strings.EqualFold(m, r.Method)
	}
	if !allowed {
		return Errorf(http.StatusMethodNotAllowed, "MethodNotAllowed", "The method '%s' is not allowed.", r.Method)
	}
	res := e.res[id.Key()]
	if res == nil {
		return NotFoundTopLevel(id)
	}
	var body map[string]any
	if r.Method == http.MethodPost || r.Method == http.MethodPut {
		b, err := e.readBody(r)
		if err != nil {
			return err
		}
		body = b
	}
	ar := &ActionRequest{Method: r.Method, Body: body, Request: r, Header: w.Header()}
	ar.AsyncOperation = func() (string, string) {
		op := e.startOp(r, opAction, res, apiVersion)
		if !op.Due.After(e.now()) {
			e.complete(tx, op)
		}
		return e.asyncURL(r, op), e.locationURL(r, op)
	}
	status, out, err := a.Handle(tx, res.ID, ar)
	if err != nil {
		return err
	}
	if out == nil {
		w.WriteHeader(status)
		return nil
	}
	writeJSON(w, status, out)
	return nil
}
