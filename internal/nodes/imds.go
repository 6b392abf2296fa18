package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// IMDSAPIVersion is the instance metadata API version read by the node manager.
const IMDSAPIVersion = "2021-10-01"

// IMDSDocument is the part of /metadata/instance the node manager uses. IMDS renders every
// primitive as a string.
type IMDSDocument struct {
	Compute struct {
		Location               string `json:"location"`
		Name                   string `json:"name"`
		ResourceID             string `json:"resourceId"`
		VMSize                 string `json:"vmSize"`
		Zone                   string `json:"zone"`
		PlatformFaultDomain    string `json:"platformFaultDomain"`
		PlatformSubFaultDomain string `json:"platformSubFaultDomain"`
		OSProfile              struct {
			ComputerName string `json:"computerName"`
		} `json:"osProfile"`
		TagsList []struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		} `json:"tagsList"`
	} `json:"compute"`
	Network struct {
		Interface []struct {
			IPv4 imdsFamily `json:"ipv4"`
			IPv6 imdsFamily `json:"ipv6"`
		} `json:"interface"`
	} `json:"network"`
}

type imdsFamily struct {
	IPAddress []struct {
		PrivateIPAddress string `json:"privateIpAddress"`
		PublicIPAddress  string `json:"publicIpAddress"`
	} `json:"ipAddress"`
}

// FetchIMDS reads the instance document from endpoint (e.g. http://169.254.169.254).
func FetchIMDS(ctx context.Context, hc *http.Client, endpoint string) (*IMDSDocument, error) {
	url := strings.TrimSuffix(endpoint, "/") + "/metadata/instance?api-version=" + IMDSAPIVersion + "&format=json"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Metadata", "true")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading instance metadata: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("reading instance metadata: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("instance metadata: GET %s: HTTP %d: %s", url, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return DecodeIMDS(body)
}

// DecodeIMDS decodes an instance metadata document.
func DecodeIMDS(body []byte) (*IMDSDocument, error) {
	var doc IMDSDocument
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("instance metadata: %w", err)
	}
	return &doc, nil
}

// NodeMetadata is what a node should carry.
type NodeMetadata struct {
	ProviderID   string
	InstanceType string
	Zone         string
	Region       string
	Addresses    []v1.NodeAddress
	// SubFaultDomain and InterconnectGroup come from the instance metadata only (empty from
	// ARM, and when the VM's document has none).
	SubFaultDomain    string
	InterconnectGroup string
}

// Labels of the VM's placement, written by the node manager from the instance metadata.
const (
	// LabelSubFaultDomain carries compute.platformSubFaultDomain.
	LabelSubFaultDomain = "topology.kubernetes.azure.com/sub-fault-domain"
	// LabelInterconnectGroup carries the value of the platform's tag TagInterconnectGroup.
	LabelInterconnectGroup = "topology.kubernetes.azure.com/interconnect-group"
	// TagInterconnectGroup is the tag (in compute.tagsList, matched case-sensitively) naming
	// the VM's interconnect group.
	TagInterconnectGroup = "Platform_Interconnect_Group"
)

// labelValue returns v if it can be a label value, else "" (a value the API server would
// refuse must not make the whole node update fail).
func labelValue(v string) string {
	if len(validation.IsValidLabelValue(v)) > 0 {
		return ""
	}
	return v
}

// MetadataFromIMDS computes a node's metadata from its own instance document, with the same
// rules as the CCM (zone "<region>-<n>" or the fault domain; providerID with a lower-case
// resource group; private IPs of the primary interface as InternalIP, public IPs as ExternalIP).
func MetadataFromIMDS(doc *IMDSDocument, nodeName string) (NodeMetadata, error) {
	pid, err := ParseVMResourceID(doc.Compute.ResourceID)
	if err != nil {
		return NodeMetadata{}, fmt.Errorf("instance metadata compute.resourceId: %w", err)
	}
	var fd *int32
	if doc.Compute.PlatformFaultDomain != "" {
		n, err := strconv.ParseInt(doc.Compute.PlatformFaultDomain, 10, 32)
		if err != nil {
			return NodeMetadata{}, fmt.Errorf("instance metadata compute.platformFaultDomain %q is not a number", doc.Compute.PlatformFaultDomain)
		}
		v := int32(n)
		fd = &v
	}
	var zones []string
	if doc.Compute.Zone != "" {
		zones = []string{doc.Compute.Zone}
	}
	zone, region, err := Zone(doc.Compute.Location, zones, fd)
	if err != nil {
		return NodeMetadata{}, fmt.Errorf("instance metadata compute.zone: %w", err)
	}
	if errs := validation.IsValidLabelValue(doc.Compute.VMSize); len(errs) > 0 {
		return NodeMetadata{}, fmt.Errorf("instance metadata compute.vmSize %q is not a label value: %s", doc.Compute.VMSize, strings.Join(errs, "; "))
	}
	md := NodeMetadata{ProviderID: pid.String(), InstanceType: doc.Compute.VMSize, Zone: zone, Region: region,
		SubFaultDomain: labelValue(doc.Compute.PlatformSubFaultDomain)}
	for _, t := range doc.Compute.TagsList {
		if t.Name == TagInterconnectGroup {
			// The first such tag decides, even when empty.
			md.InterconnectGroup = labelValue(t.Value)
			break
		}
	}
	if len(doc.Network.Interface) == 0 {
		return NodeMetadata{}, fmt.Errorf("instance metadata has no network interface")
	}
	primary := doc.Network.Interface[0]
	var external []v1.NodeAddress
	for fi, fam := range []imdsFamily{primary.IPv4, primary.IPv6} {
		for i, a := range fam.IPAddress {
			// An address that is no IP would make the node status update fail as a whole.
			for _, f := range []struct{ name, addr string }{{"privateIpAddress", a.PrivateIPAddress}, {"publicIpAddress", a.PublicIPAddress}} {
				if f.addr != "" && net.ParseIP(f.addr) == nil {
					return NodeMetadata{}, fmt.Errorf("instance metadata network.interface[0].%s.ipAddress[%d].%s %q is not an IP address",
						[]string{"ipv4", "ipv6"}[fi], i, f.name, f.addr)
				}
			}
			if a.PrivateIPAddress != "" {
				md.Addresses = append(md.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: a.PrivateIPAddress})
			}
			if a.PublicIPAddress != "" {
				external = append(external, v1.NodeAddress{Type: v1.NodeExternalIP, Address: a.PublicIPAddress})
			}
		}
	}
	if len(md.Addresses) == 0 {
		return NodeMetadata{}, fmt.Errorf("instance metadata has no private IP on the primary interface")
	}
	md.Addresses = append(md.Addresses, external...)
	md.Addresses = append(md.Addresses, v1.NodeAddress{Type: v1.NodeHostName, Address: nodeName})
	return md, nil
}

// Labels and taint written by the node initializer.
const (
	LabelZoneBeta         = "failure-domain.beta.kubernetes.io/zone"
	LabelRegionBeta       = "failure-domain.beta.kubernetes.io/region"
	LabelInstanceTypeBeta = "beta.kubernetes.io/instance-type"
	// TaintUninitialized is set by the kubelet with --cloud-provider=external.
	TaintUninitialized = "node.cloudprovider.kubernetes.io/uninitialized"
)

// InitOptions tune ApplyMetadata.
type InitOptions struct {
	// BetaLabels also writes the deprecated failure-domain.beta / beta instance-type labels.
	BetaLabels bool
	// RemoveUninitializedTaint removes the cloud provider's uninitialized taint.
	RemoveUninitializedTaint bool
}

// ApplyMetadata returns a copy of node carrying md (providerID only if unset: it is
// immutable), and whether the spec/labels and the status addresses changed.
func ApplyMetadata(node *v1.Node, md NodeMetadata, o InitOptions) (out *v1.Node, specChanged, statusChanged bool) {
	out = node.DeepCopy()
	if out.Spec.ProviderID == "" && md.ProviderID != "" {
		out.Spec.ProviderID = md.ProviderID
		specChanged = true
	}
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	set := func(k, v string) {
		if v != "" && out.Labels[k] != v {
			out.Labels[k] = v
			specChanged = true
		}
	}
	set(v1.LabelTopologyZone, md.Zone)
	set(v1.LabelTopologyRegion, md.Region)
	set(v1.LabelInstanceTypeStable, md.InstanceType)
	set(LabelSubFaultDomain, md.SubFaultDomain)
	set(LabelInterconnectGroup, md.InterconnectGroup)
	if o.BetaLabels {
		set(LabelZoneBeta, md.Zone)
		set(LabelRegionBeta, md.Region)
		set(LabelInstanceTypeBeta, md.InstanceType)
	}
	if o.RemoveUninitializedTaint {
		var kept []v1.Taint
		for _, t := range out.Spec.Taints {
			if t.Key == TaintUninitialized {
				specChanged = true
				continue
			}
			kept = append(kept, t)
		}
		out.Spec.Taints = kept
	}
	if len(md.Addresses) > 0 && !sameAddresses(out.Status.Addresses, md.Addresses) {
		out.Status.Addresses = append([]v1.NodeAddress(nil), md.Addresses...)
		statusChanged = true
	}
	return out, specChanged, statusChanged
}

func sameAddresses(a, b []v1.NodeAddress) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
