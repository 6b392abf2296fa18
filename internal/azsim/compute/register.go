package compute

import (
	"crypto/rand"
	"encoding/binary"
	"net/http"
	"strings"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/network"
)

// Config configures the Microsoft.Compute handlers.
type Config struct {
	// Locations are the regions (and their zones) the provider documents
	// advertise and zones are validated against. Default: DefaultLocations().
	// Resources in a location that is not listed are accepted without zones.
	Locations []Location
}

// handler holds the per-engine state of the compute resource types. Its maps
// are only touched inside engine transactions, so the engine lock guards them.
type handler struct {
	e   *arm.Engine
	cfg Config
	// nextID is the next Uniform instance id per scale set key: Azure never
	// reuses an instance id. Lost on snapshot restore (max id + 1 then).
	nextID map[string]int
	// scalingIn is set while a scale set write deletes its own instances, so
	// that the per-instance delete hook does not also lower sku.capacity.
	scalingIn bool
	rnd       func() uint32
	// ipcCache holds the ip configurations scaleSetIPConfigs extracted from
	// each instance document, by instance ID, valid while its etag is the
	// same (every change of a stored document renews its etag). The network
	// deriver asks for them after every write; only touched under the engine lock.
	ipcCache map[string]ipcCacheEntry
}

type ipcCacheEntry struct {
	etag string
	cfgs []network.IPConfiguration
}

// Register adds the Microsoft.Compute resource types, the scale set NIC views
// of the Network API, the provider documents of Microsoft.Compute and
// Microsoft.Network, and the compute deriver (back-references, disk
// attachment, scale set ip configurations in load balancer pools). Call it
// after network.Register. An optional Config overrides the defaults.
func Register(e *arm.Engine, cfgs ...Config) {
	h := &handler{e: e, nextID: map[string]int{}, rnd: randomUint32}
	if len(cfgs) > 0 {
		h.cfg = cfgs[0]
	}
	if len(h.cfg.Locations) == 0 {
		h.cfg.Locations = DefaultLocations()
	}
	crp := func(s arm.TypeSpec) arm.TypeSpec {
		if s.APIVersions == nil {
			s.APIVersions = arm.ComputeAPIVersions
		}
		s.CreatingState = "Creating"
		s.OperationStatusExtras = true
		if s.Polling == arm.PollingNRP {
			s.Polling = arm.PollingCRP
		}
		return s
	}
	e.Register(crp(arm.TypeSpec{
		Type:         TypeAvailSet,
		ETag:         arm.ETagNone,
		Patch:        arm.PatchMerge,
		PutLRO:       arm.LRONone,
		DeleteLRO:    arm.LRONone,
		CreateStatus: http.StatusOK,
		UpdateStatus: http.StatusOK,
		DeleteStatus: http.StatusOK,
		Prepare:      h.prepareAvailabilitySet,
	}))
	// Scale set instances are registered BEFORE their parent type on purpose:
	// the engine then stores each instance as a resource of its own (keyed by
	// its full ID) instead of inlining it into the scale set document, which
	// would show every instance in the scale set's GET.
	e.Register(crp(arm.TypeSpec{
		Type:         TypeVMSSVM,
		ETag:         arm.ETagCounter,
		Put:          arm.PutMerge,
		Patch:        arm.PatchUnsupported,
		UpdateStatus: http.StatusOK,
		NamePattern:  instanceIDPattern,
		// A tags-only write is not a model change: the instance keeps its etag.
		KeepETag:    func(old, doc map[string]any) bool { return sameModel(old, doc, "tags") },
		Prepare:     h.prepareVMSSVM,
		AfterDelete: h.afterDeleteVMSSVM,
		Actions:     h.instanceActions(true),
	}))
	e.Register(crp(arm.TypeSpec{
		Type:        TypeVMSS,
		ETag:        arm.ETagCounter,
		Put:         arm.PutMerge,
		Patch:       arm.PatchMerge,
		NameMaxLen:  64,
		KeepETag:    func(old, doc map[string]any) bool { return sameModel(old, doc) },
		Prepare:     h.prepareVMSS,
		AfterDelete: h.afterDeleteVMSS,
		Actions:     h.scaleSetActions(),
	}))
	e.Register(
		arm.TypeSpec{
			Type:        TypeVMSSVM + "/networkInterfaces",
			APIVersions: arm.VMSSNetworkInterfaceAPIVersions,
			VirtualGet:  h.getInstanceNIC,
			VirtualList: h.listInstanceNICs,
		},
		arm.TypeSpec{
			Type:        TypeVMSS + "/networkInterfaces",
			APIVersions: arm.VMSSNetworkInterfaceAPIVersions,
			VirtualList: h.listScaleSetNICs,
		},
	)
	e.Register(crp(arm.TypeSpec{
		Type: TypeVM,
		ETag: arm.ETagCounter,
		// CRP answers a VM create with "1" and shows "2" once the VM is created.
		RenewETagWhenCreated: true,
		UpdatePollsResource:  true,
		Put:                  arm.PutMerge,
		Patch:                arm.PatchMerge,
		NameMaxLen:           64,
		Prepare:              h.prepareVM,
		AfterDelete:          h.afterDeleteVM,
		Actions:              h.instanceActions(false),
	}))
	e.Register(crp(arm.TypeSpec{
		Type:         TypeDisk,
		APIVersions:  arm.DiskAPIVersions,
		Polling:      arm.PollingCRPDisks,
		ETag:         arm.ETagNone,
		Patch:        arm.PatchMerge,
		CreateStatus: http.StatusAccepted,
		UpdateStatus: http.StatusAccepted,
		Prepare:      h.prepareDisk,
		BeforeDelete: h.beforeDeleteDisk,
	}))
	e.AddRoute(h.matchInstanceRead, http.HandlerFunc(h.serveInstanceRead))
	e.AddRoute(matchProvider, http.HandlerFunc(h.serveProvider))
	network.AddIPConfigSource(e, h.scaleSetIPConfigs)
	e.AddDeriver(h.derive)
}

func randomUint32() uint32 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return binary.BigEndian.Uint32(b[:])
}

// ---- provider documents ----

var providerTypes = map[string][]ResourceType{
	"microsoft.compute": {
		{Name: "virtualMachines", APIVersions: arm.ComputeAPIVersions},
		{Name: "virtualMachineScaleSets", APIVersions: arm.ComputeAPIVersions},
		{Name: "virtualMachineScaleSets/virtualMachines", APIVersions: arm.ComputeAPIVersions},
		{Name: "availabilitySets", APIVersions: arm.ComputeAPIVersions},
		{Name: "disks", APIVersions: arm.DiskAPIVersions},
	},
	"microsoft.network": {
		{Name: "loadBalancers", APIVersions: arm.NetworkAPIVersions},
		{Name: "publicIPAddresses", APIVersions: arm.NetworkAPIVersions},
		{Name: "publicIPPrefixes", APIVersions: arm.PublicIPPrefixAPIVersions},
		{Name: "networkInterfaces", APIVersions: arm.NetworkAPIVersions},
		{Name: "networkSecurityGroups", APIVersions: arm.NetworkAPIVersions},
		{Name: "routeTables", APIVersions: arm.NetworkAPIVersions},
		{Name: "virtualNetworks", APIVersions: arm.NetworkAPIVersions},
		{Name: "natGateways", APIVersions: arm.NATGatewayAPIVersions},
		{Name: "serviceGateways", APIVersions: arm.ServiceGatewayAPIVersions},
	},
}

var providerNames = map[string]string{"microsoft.compute": "Microsoft.Compute", "microsoft.network": "Microsoft.Network"}

// matchProvider matches GET /subscriptions/{sub}/providers (the list) and
// GET /subscriptions/{sub}/providers/{Microsoft.Compute|Microsoft.Network}.
func matchProvider(r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	segs := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(segs) < 3 || !strings.EqualFold(segs[0], "subscriptions") || !strings.EqualFold(segs[2], "providers") {
		return false
	}
	return len(segs) == 3 || len(segs) == 4 && providerTypes[strings.ToLower(segs[3])] != nil
}

func (h *handler) serveProvider(w http.ResponseWriter, r *http.Request) {
	segs := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if r.URL.Query().Get("api-version") == "" {
		writeARMError(w, arm.BadRequest("MissingApiVersionParameter", "The api-version query parameter (?api-version=) is required for all requests."))
		return
	}
	if len(segs) == 3 {
		// The list holds every provider azsim serves, in namespace order (one page).
		out := map[string]any{"value": []any{}}
		for _, ns := range []string{"microsoft.compute", "microsoft.network"} {
			out["value"] = append(out["value"].([]any), ProviderDocument(segs[1], providerNames[ns], providerTypes[ns], h.cfg.Locations))
		}
		writeJSONBody(w, http.StatusOK, out)
		return
	}
	ns := strings.ToLower(segs[3])
	writeJSONBody(w, http.StatusOK, ProviderDocument(segs[1], providerNames[ns], providerTypes[ns], h.cfg.Locations))
}
