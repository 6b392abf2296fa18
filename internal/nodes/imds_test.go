package nodes

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	v1 "k8s.io/api/core/v1"
)

const imdsUniform = `{"compute":{"location":"EastUS","name":"pool_3","resourceId":"/subscriptions/sub/resourceGroups/RG/providers/Microsoft.Compute/virtualMachineScaleSets/pool/virtualMachines/3",
 "vmSize":"Standard_D2s_v3","zone":"2","platformFaultDomain":"0","osProfile":{"computerName":"pool000003"}},
 "network":{"interface":[{"ipv4":{"ipAddress":[{"privateIpAddress":"10.240.0.7","publicIpAddress":"203.0.113.9"}]},"ipv6":{"ipAddress":[{"privateIpAddress":"fd00::7"}]}}]}}`

func TestFetchIMDSAndMetadata(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Metadata") != "true" || r.URL.Query().Get("api-version") != IMDSAPIVersion || r.URL.Path != "/metadata/instance" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte(imdsUniform))
	}))
	defer srv.Close()
	doc, err := FetchIMDS(context.Background(), srv.Client(), srv.URL+"/")
	if err != nil {
		t.Fatal(err)
	}
	md, err := MetadataFromIMDS(doc, "pool000003")
	if err != nil {
		t.Fatal(err)
	}
	want := NodeMetadata{
		ProviderID:   "azure:///subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/pool/virtualMachines/3",
		InstanceType: "Standard_D2s_v3", Zone: "eastus-2", Region: "eastus",
		Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.240.0.7"}, {Type: v1.NodeInternalIP, Address: "fd00::7"},
			{Type: v1.NodeExternalIP, Address: "203.0.113.9"}, {Type: v1.NodeHostName, Address: "pool000003"}},
	}
	a, _ := json.Marshal(md)
	b, _ := json.Marshal(want)
	if string(a) != string(b) {
		t.Fatalf("got %s\nwant %s", a, b)
	}

	// Non-zonal VM: fault domain; bad documents are errors.
	doc.Compute.Zone, doc.Compute.PlatformFaultDomain = "", "1"
	if md, _ := MetadataFromIMDS(doc, "n"); md.Zone != "1" {
		t.Errorf("fault domain zone %q", md.Zone)
	}
	doc.Compute.PlatformFaultDomain = "x"
	if _, err := MetadataFromIMDS(doc, "n"); err == nil {
		t.Error("bad fault domain accepted")
	}
	doc.Compute.ResourceID = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/x/y"
	if _, err := MetadataFromIMDS(doc, "n"); err == nil {
		t.Error("bad resource ID accepted")
	}
	if _, err := FetchIMDS(context.Background(), srv.Client(), srv.URL+"/nothing-here"); err == nil {
		t.Error("HTTP error not reported")
	}
}

func TestApplyMetadata(t *testing.T) {
	md := NodeMetadata{ProviderID: "azure:///x", InstanceType: "Standard_D2s_v3", Zone: "eastus-1", Region: "eastus",
		Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.4"}, {Type: v1.NodeHostName, Address: "n"}}}
	n := &v1.Node{Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: TaintUninitialized, Effect: v1.TaintEffectNoSchedule}, {Key: "other"}}}}
	out, spec, status := ApplyMetadata(n, md, InitOptions{RemoveUninitializedTaint: true, BetaLabels: true})
	if !spec || !status || out.Spec.ProviderID != "azure:///x" || out.Labels[v1.LabelTopologyZone] != "eastus-1" ||
		out.Labels[LabelZoneBeta] != "eastus-1" || out.Labels[v1.LabelInstanceTypeStable] != "Standard_D2s_v3" ||
		len(out.Spec.Taints) != 1 || out.Spec.Taints[0].Key != "other" || len(out.Status.Addresses) != 2 {
		t.Fatalf("spec=%v status=%v %+v", spec, status, out)
	}
	if len(n.Spec.Taints) != 2 || n.Labels != nil {
		t.Fatal("input modified")
	}
	// Idempotent; providerID is never overwritten.
	md.ProviderID = "azure:///other"
	_, spec, status = ApplyMetadata(out, md, InitOptions{RemoveUninitializedTaint: true, BetaLabels: true})
	if spec || status {
		t.Fatalf("second apply changed: spec=%v status=%v", spec, status)
	}
	// Without the option the taint stays.
	out2, _, _ := ApplyMetadata(n, md, InitOptions{})
	if len(out2.Spec.Taints) != 2 {
		t.Fatal("taint removed without the option")
	}
}

func TestIMDSPlacementLabels(t *testing.T) {
	for _, tc := range []struct {
		name, compute       string
		subFD, interconnect string
	}{
		{name: "both", compute: `"platformSubFaultDomain":"3","tagsList":[{"name":"a","value":"b"},{"name":"Platform_Interconnect_Group","value":"ig-7"}]`,
			subFD: "3", interconnect: "ig-7"},
		{name: "none", compute: `"tagsList":[{"name":"a","value":"b"}]`},
		{name: "tag name is case-sensitive", compute: `"tagsList":[{"name":"platform_interconnect_group","value":"ig-7"}]`},
		{name: "first tag decides", compute: `"tagsList":[{"name":"Platform_Interconnect_Group","value":""},{"name":"Platform_Interconnect_Group","value":"ig-7"}]`},
		{name: "no label value", compute: `"platformSubFaultDomain":"a b","tagsList":[{"name":"Platform_Interconnect_Group","value":"x/y"}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var raw map[string]map[string]any
			if err := json.Unmarshal([]byte(imdsUniform), &raw); err != nil {
				t.Fatal(err)
			}
			var extra map[string]any
			if err := json.Unmarshal([]byte("{"+tc.compute+"}"), &extra); err != nil {
				t.Fatal(err)
			}
			for k, v := range extra {
				raw["compute"][k] = v
			}
			b, _ := json.Marshal(raw)
			doc, err := DecodeIMDS(b)
			if err != nil {
				t.Fatal(err)
			}
			md, err := MetadataFromIMDS(doc, "pool000003")
			if err != nil {
				t.Fatal(err)
			}
			if md.SubFaultDomain != tc.subFD || md.InterconnectGroup != tc.interconnect {
				t.Fatalf("sub fault domain %q, interconnect group %q; want %q, %q", md.SubFaultDomain, md.InterconnectGroup, tc.subFD, tc.interconnect)
			}
			out, _, _ := ApplyMetadata(&v1.Node{}, md, InitOptions{})
			for label, want := range map[string]string{LabelSubFaultDomain: tc.subFD, LabelInterconnectGroup: tc.interconnect} {
				got, ok := out.Labels[label]
				if ok != (want != "") || got != want {
					t.Errorf("label %s = %q (present %v), want %q", label, got, ok, want)
				}
			}
		})
	}
}
