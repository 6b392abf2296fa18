package armjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// The resource models the CCM reads and writes, each checked against the SDK's own codec.
func models() []any {
	return []any{
		armnetwork.LoadBalancer{}, armnetwork.SecurityGroup{}, armnetwork.PublicIPAddress{}, armnetwork.Interface{},
		armnetwork.Subnet{}, armnetwork.RouteTable{}, armnetwork.PrivateLinkService{}, armnetwork.BackendAddressPool{},
		armcompute.VirtualMachineScaleSetVM{}, armcompute.VirtualMachineScaleSet{}, armcompute.VirtualMachine{},
	}
}

// filler sets random values on a model, down to depth levels of structs.
type filler struct {
	rng *rand.Rand
}

// Strings that exercise encoding/json's escaping and its U+FFFD replacement.
var samples = []string{"", "kubernetes", "a<b>&c", "quote\"back\\slash", "tab\tnew\nline\rcr\b\f", "\x01\x1f",
	"ünïcödé ☃ 😀", "\u2028\u2029", "bad\xffutf8\xc3", "/subscriptions/0000/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/kubernetes"}

func (f *filler) fill(v reflect.Value, depth int) {
	switch v.Kind() {
	case reflect.Pointer:
		if depth <= 0 && v.Type().Elem().Kind() == reflect.Struct {
			return
		}
		p := reflect.New(v.Type().Elem())
		f.fill(p.Elem(), depth)
		v.Set(p)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(f.rng.Int64N(4e9), f.rng.Int64N(1e9)).UTC()))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() && f.rng.IntN(3) > 0 {
				f.fill(v.Field(i), depth-1)
			}
		}
	case reflect.String:
		v.SetString(samples[f.rng.IntN(len(samples))])
	case reflect.Bool:
		v.SetBool(f.rng.IntN(2) == 1)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(f.rng.Int64() >> (64 - v.Type().Bits()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(f.rng.Uint64() >> (64 - v.Type().Bits()))
	case reflect.Float32, reflect.Float64:
		fs := []float64{0, 1, -2.5, 1e-7, 1e21, 123456789.125, 3.4e38}
		v.SetFloat(fs[f.rng.IntN(len(fs))])
	case reflect.Slice:
		n := f.rng.IntN(4)
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			if s.Index(i).Kind() == reflect.Pointer && f.rng.IntN(8) == 0 {
				continue // a nil element
			}
			f.fill(s.Index(i), depth)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for range f.rng.IntN(3) {
			e := reflect.New(v.Type().Elem()).Elem()
			f.fill(e, depth)
			m.SetMapIndex(reflect.ValueOf(samples[f.rng.IntN(len(samples))]).Convert(v.Type().Key()), e)
		}
		v.Set(m)
	case reflect.Interface:
		v.Set(reflect.ValueOf(map[string]any{"k": samples[f.rng.IntN(len(samples))], "n": 1.5}))
	}
}

func TestMatchesSDKOnRandomModels(t *testing.T) {
	c := New()
	f := filler{rng: rand.New(rand.NewPCG(1, 2))}
	for _, m := range models() {
		typ := reflect.TypeOf(m)
		t.Run(typ.Name(), func(t *testing.T) {
			for i := range 300 {
				v := reflect.New(typ)
				f.fill(v.Elem(), 2+i%5)
				want, err := json.Marshal(v.Interface())
				if err != nil {
					t.Fatal(err)
				}
				got, err := c.Marshal(v.Interface())
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("Marshal differs from the SDK's:\n got %s\nwant %s", got, want)
				}
				sdk, ours := reflect.New(typ), reflect.New(typ)
				if err := json.Unmarshal(want, sdk.Interface()); err != nil {
					t.Fatal(err)
				}
				if err := c.Unmarshal(want, ours.Interface()); err != nil {
					t.Fatalf("Unmarshal: %v\n%s", err, want)
				}
				if !reflect.DeepEqual(sdk.Interface(), ours.Interface()) {
					t.Fatalf("Unmarshal differs from the SDK's for\n%s", want)
				}
			}
		})
	}
}

// The models the CCM writes in bulk must be modelled by the codec down to their big lists, not
// handed back to the SDK's methods: that is the codec's whole point.
func TestHotModelsAreNotDelegated(t *testing.T) {
	c := New()
	for _, typ := range []reflect.Type{
		reflect.TypeFor[armnetwork.LoadBalancer](), reflect.TypeFor[armnetwork.LoadBalancerPropertiesFormat](),
		reflect.TypeFor[armnetwork.BackendAddressPool](), reflect.TypeFor[armnetwork.BackendAddressPoolPropertiesFormat](),
		reflect.TypeFor[armnetwork.LoadBalancerBackendAddress](), reflect.TypeFor[armnetwork.LoadBalancerBackendAddressPropertiesFormat](),
		reflect.TypeFor[armnetwork.InterfaceIPConfiguration](), reflect.TypeFor[armnetwork.FrontendIPConfiguration](),
		reflect.TypeFor[armnetwork.LoadBalancingRule](), reflect.TypeFor[armnetwork.Probe](),
		reflect.TypeFor[armnetwork.SecurityGroup](), reflect.TypeFor[armnetwork.SecurityRule](), reflect.TypeFor[armnetwork.SubResource](),
	} {
		if d, why := c.Delegated(typ); d {
			t.Errorf("%s is delegated to the SDK: %s", typ, why)
		}
	}
	// A struct with a time field is formatted by its own methods.
	if d, _ := c.Delegated(reflect.TypeFor[armcompute.VirtualMachineScaleSetVMProperties]()); !d {
		t.Error("VirtualMachineScaleSetVMProperties (it has TimeCreated) is not delegated")
	}
}

func TestNullSentinelIsWrittenAsNull(t *testing.T) {
	lb := armnetwork.LoadBalancer{Name: to.Ptr("lb"), Tags: azcore.NullValue[map[string]*string](), Location: azcore.NullValue[*string]()}
	want, _ := json.Marshal(lb)
	got, err := New().Marshal(lb)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func TestUnmarshalEdgeCases(t *testing.T) {
	for _, in := range []string{
		`null`, `{}`, ` { "name" : "x" , "unknown": [1, {"a": [true, false, null]}], "tags": {"a": null, "b": "c"} } `,
		`{"name": null}`, `{"name":"a","name":"b"}`, `{"nam\u0065": "escaped key"}`, `{"name": "\ud83d\ude00 \ud800 x \u00e9"}`,
		`{"properties": {"backendAddressPools": [null, {"name": "p"}], "frontendIPConfigurations": []}}`,
		`{"properties": {"probes": [{"properties": {"port": -0, "intervalInSeconds": 2147483647}}]}}`,
		// errors
		`{"name": 1}`, `{"properties": {"probes": [{"properties": {"port": 1.5}}]}}`, `{"properties": {"probes": [{"properties": {"port": 2147483648}}]}}`,
		`{"name": "x"`, `{"name" "x"}`, `[]`, `"x"`, `{"name": "\x01"}`, `{"name": "\q"}`, `{"a": 01}`, `{"a": -}`, `{"a": 1.}`, `{"a": 1e}`,
		`{"a": tru}`, `{} {}`, `{"name": "x",}`, `{,}`,
	} {
		var sdk, ours armnetwork.LoadBalancer
		sdkErr := json.Unmarshal([]byte(in), &sdk)
		oursErr := New().Unmarshal([]byte(in), &ours)
		if (sdkErr == nil) != (oursErr == nil) {
			t.Errorf("%s: SDK error %v, ours %v", in, sdkErr, oursErr)
			continue
		}
		if sdkErr == nil && !reflect.DeepEqual(sdk, ours) {
			t.Errorf("%s: SDK %+v, ours %+v", in, sdk, ours)
		}
	}
}

// bigLoadBalancer is the shape of a 5,000-node cluster's load balancer: one nodeIP pool of
// 5,000 addresses, 1,000 frontends and rules.
func bigLoadBalancer(nodes, services int) *armnetwork.LoadBalancer {
	vnet := "/subscriptions/0000/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/vnet"
	lbID := "/subscriptions/0000/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/kubernetes"
	pool := &armnetwork.BackendAddressPool{ID: to.Ptr(lbID + "/backendAddressPools/kubernetes"), Name: to.Ptr("kubernetes"),
		Properties: &armnetwork.BackendAddressPoolPropertiesFormat{}}
	for i := range nodes {
		pool.Properties.LoadBalancerBackendAddresses = append(pool.Properties.LoadBalancerBackendAddresses, &armnetwork.LoadBalancerBackendAddress{
			Name: to.Ptr(fmt.Sprintf("node-%05d", i)),
			Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{IPAddress: to.Ptr(fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)),
				VirtualNetwork: &armnetwork.SubResource{ID: &vnet}, AdminState: to.Ptr(armnetwork.LoadBalancerBackendAddressAdminStateNone)}})
	}
	lb := &armnetwork.LoadBalancer{ID: &lbID, Name: to.Ptr("kubernetes"), Location: to.Ptr("eastus"), Etag: to.Ptr(`W/"1"`),
		SKU:        &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{BackendAddressPools: []*armnetwork.BackendAddressPool{pool}}}
	for i := range services {
		fe := fmt.Sprintf("a%031x", i)
		lb.Properties.FrontendIPConfigurations = append(lb.Properties.FrontendIPConfigurations, &armnetwork.FrontendIPConfiguration{
			ID: to.Ptr(lbID + "/frontendIPConfigurations/" + fe), Name: &fe,
			Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{PublicIPAddress: &armnetwork.PublicIPAddress{
				ID: to.Ptr(fmt.Sprintf("/subscriptions/0000/resourceGroups/rg/providers/Microsoft.Network/publicIPAddresses/kubernetes-%s", fe))}}})
		lb.Properties.LoadBalancingRules = append(lb.Properties.LoadBalancingRules, &armnetwork.LoadBalancingRule{
			Name: to.Ptr(fe + "-TCP-80"), Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
				Protocol: to.Ptr(armnetwork.TransportProtocolTCP), FrontendPort: to.Ptr[int32](80), BackendPort: to.Ptr[int32](80),
				EnableFloatingIP: to.Ptr(true), IdleTimeoutInMinutes: to.Ptr[int32](4),
				FrontendIPConfiguration: &armnetwork.SubResource{ID: to.Ptr(lbID + "/frontendIPConfigurations/" + fe)},
				BackendAddressPool:      &armnetwork.SubResource{ID: pool.ID}}})
	}
	return lb
}

func TestBigLoadBalancerMatchesSDK(t *testing.T) {
	lb := bigLoadBalancer(500, 100)
	want, _ := json.Marshal(lb)
	c := New()
	got, err := c.Marshal(lb)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Marshal: %v, equal %v", err, bytes.Equal(got, want))
	}
	var back armnetwork.LoadBalancer
	if err := c.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, lb) {
		t.Fatal("round trip differs")
	}
}

// go test -bench . -benchmem ./internal/armjson/ compares the codec with the SDK's methods on a
// 5,000-address load balancer.
func BenchmarkLoadBalancer(b *testing.B) {
	lb := bigLoadBalancer(5000, 1000)
	data, _ := json.Marshal(lb)
	c := New()
	b.Run("marshal/sdk", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := json.Marshal(lb); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("marshal/armjson", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := c.Marshal(lb); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unmarshal/sdk", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			var out armnetwork.LoadBalancer
			if err := json.Unmarshal(data, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unmarshal/armjson", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			var out armnetwork.LoadBalancer
			if err := c.Unmarshal(data, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func FuzzUnmarshalLoadBalancer(f *testing.F) {
	seed, _ := json.Marshal(bigLoadBalancer(3, 2))
	f.Add(seed)
	f.Add([]byte(`{"name":"a\u00e9\ud800","tags":{"x":null},"properties":{"probes":[null,{"properties":{"port":80}}]}}`))
	c := New()
	f.Fuzz(func(t *testing.T, data []byte) {
		var sdk, ours armnetwork.LoadBalancer
		sdkErr := json.Unmarshal(data, &sdk)
		oursErr := c.Unmarshal(data, &ours)
		switch {
		case oursErr == nil && sdkErr != nil:
			t.Fatalf("the SDK refuses what the codec accepts: %v", sdkErr)
		case oursErr != nil && sdkErr == nil && !hasRepeatedKey(data):
			t.Fatalf("the codec refuses what the SDK accepts: %v", oursErr)
		case oursErr == nil && !reflect.DeepEqual(sdk, ours):
			t.Fatalf("decoded differently")
		}
		if oursErr == nil {
			want, err1 := json.Marshal(&ours)
			got, err2 := c.Marshal(&ours)
			if (err1 == nil) != (err2 == nil) || !bytes.Equal(got, want) {
				t.Fatalf("Marshal differs: %v %v\n got %s\nwant %s", err1, err2, got, want)
			}
		}
	})
}

// hasRepeatedKey reports an object with a key twice anywhere in data (the one case where the
// codec may refuse what the SDK, keeping only the last, accepts).
func hasRepeatedKey(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		object bool
		keys   map[string]bool
		expect bool // next string token in an object is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		top := func() *frame {
			if len(stack) == 0 {
				return nil
			}
			return stack[len(stack)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				if fr := top(); fr != nil && fr.object {
					fr.expect = true
				}
				stack = append(stack, &frame{object: v == '{', keys: map[string]bool{}, expect: true})
			default:
				stack = stack[:len(stack)-1]
				if fr := top(); fr != nil && fr.object {
					fr.expect = true
				}
			}
		case string:
			if fr := top(); fr != nil && fr.object && fr.expect {
				if fr.keys[strings.Clone(v)] {
					return true
				}
				fr.keys[v] = true
				fr.expect = false
				continue
			}
			if fr := top(); fr != nil && fr.object {
				fr.expect = true
			}
		default:
			if fr := top(); fr != nil && fr.object {
				fr.expect = true
			}
		}
	}
}
