// Package arm is azsim's Azure Resource Manager engine: it speaks the ARM wire
// protocol that unmodified Azure SDK for Go clients expect, over any
// http.Handler stack, and holds the emulated resources in memory.
//
// What the engine does for every resource type:
//
//   - Routing of /subscriptions/{s}[/resourceGroups/{g}]/providers/{ns}/{type}/{name}[/{child}/{name}…]
//     (case-insensitive fixed segments, /resourcegroups, microsoft.Compute …);
//     IDs in responses use the registered type casing and the casing of the first create.
//   - api-version required (400 MissingApiVersionParameter) and checked against
//     the type's allow-list (400 NoRegisteredProviderFound; InvalidApiVersionParameter
//     for resource groups); unknown type → 400 InvalidResourceType, unknown
//     namespace → 400 InvalidResourceNamespace.
//   - PUT (create 201 / replace 200, or deep merge for TypeSpec.Put == PutMerge),
//     PATCH (tags only, sync 200; or merge LRO), GET (404 ResourceNotFound,
//     ResourceGroupNotFound, NotFound for children), DELETE (202 +
//     Azure-AsyncOperation + Location; 204 when missing), LIST per resource group
//     and per subscription with absolute nextLink ($skipToken), child collections.
//   - Child resources (subnets, securityRules, routes, backendAddressPools …)
//     live inline in the parent document; their own API edits the parent (the
//     parent's Prepare hook sees the write with Write.Child set). The engine fills
//     child id, type, etag (= parent etag) and provisioningState. A child type
//     with NoAPI gets those fields but no API (read-only sub-resources such as a
//     private link service's ipConfigurations); one with PutLRO LRONone answers
//     its PUTs synchronously (approving a private endpoint connection).
//   - ETags: W/"<guid>" (ETagWeakGUID) or "1","2",… (ETagCounter), renewed on
//     every change; If-Match / If-None-Match → 412 PreconditionFailed bodies as NRP/CRP.
//   - LROs: writes answer with a non-terminal provisioningState while
//     Config.LRODuration runs, plus an absolute Azure-AsyncOperation URL
//     {base}/subscriptions/{s}/providers/{ns}/locations/{loc}/operations/{id}?api-version=…
//     ({"status":"InProgress|Succeeded|Failed|Canceled"}) and, for DELETE, a Location
//     URL (.../operationResults/{id}). Operations complete lazily (no goroutines):
//     every request first completes the operations that are due. Duration 0 →
//     the PUT body already says Succeeded, the SDK does PUT + final GET.
//   - Errors: {"error":{"code","message","details"?}}; headers x-ms-request-id,
//     x-ms-correlation-request-id, echoed x-ms-client-request-id,
//     x-ms-ratelimit-remaining-subscription-reads/writes (only if not already set
//     on the ResponseWriter, so throttling middleware can set them first).
//   - 401 when Config.Authorize fails; 413 above Config.MaxBodyBytes; 400
//     InvalidRequestContent for malformed JSON; 400 InvalidResourceName; panics
//     become 500 InternalServerError bodies.
//
// Go API for the other azsim packages:
//
//	e := arm.NewEngine(arm.Config{BaseURL: func() string { return url }, LRODuration: 0, PageSize: 100,
//	        Authorize: identity.Validate /* func(*http.Request) error */})
//	network.Register(e)                     // resource groups + Microsoft.Network
//	compute.Register(e)                     // Microsoft.Compute (TypeSpec values via e.Register)
//	http.Handle("/", middleware(e))         // e is an http.Handler
//
//	e.Register(arm.TypeSpec{...})           // add resource types (children after parents)
//	e.AddDeriver(func(tx *arm.Tx, changed []string) {...}) // recompute derived fields after writes
//	e.AddRoute(match, handler)              // non-resource endpoints (e.g. GET /subscriptions/{s}/providers);
//	                                        // arm.WriteJSON / arm.WriteError answer in ARM's format
//	e.Do(func(tx *arm.Tx) error {...})      // read/modify state without HTTP, derivers run after
//	e.GetResource(id) ([]byte, bool)        // JSON of a resource or child element
//	e.ListResources("Microsoft.Network/loadBalancers") [][]byte
//	e.Snapshot() ([]byte, error); e.Restore(b) error; e.Reset()
//	e.FailNextLRO(func(arm.LROInfo) bool {...}, &arm.Error{Code: "InternalServerError", Message: "..."})
//	r = r.WithContext(arm.WithLROOptions(ctx, arm.LROOptions{Duration: &d, Fail: &arm.Error{...}})) // per request
//
// Inside handlers and derivers (*Tx, engine lock held): Get, GetChild, Exists,
// CanonicalID, List, Update (etag renewed only on real change), Create, Delete,
// MarkChanged, and the IP allocator ReserveIP / ReleaseIP / ReleaseIPsExcept /
// IPOwner (owners are IDs; deleting a resource frees everything owned under its
// ID). The network package wraps the allocator as network.AllocatePrivateIP(tx,
// subnetID, ownerID, wantIP) for compute's VM NICs, and exposes
// network.AddIPConfigSource so compute can feed scale-set VM ip configurations
// into the pools' backendIPConfigurations.
//
// Documents are generic JSON (map[string]any, numbers as json.Number) in the
// JSON shape of the SDK models (armnetwork/v9, armcompute/v7); handlers use
// ToModel / FromModel to work with the typed structs, and the helpers Props,
// Str, Arr, SetArr, RefIDs, Refs, FindByName, DeepMerge, CopyDoc.
package arm
