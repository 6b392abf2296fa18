package localpools

import (
	"reflect"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
)

func ep(node string, ready, terminating *bool) discoveryv1.Endpoint {
	e := discoveryv1.Endpoint{Conditions: discoveryv1.EndpointConditions{Ready: ready, Terminating: terminating}}
	if node != "" {
		e.NodeName = &node
	}
	return e
}

func TestReadyNodes(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		name   string
		slices []*discoveryv1.EndpointSlice
		want   []string
	}{
		{"none", nil, nil},
		{"ready, unknown, not ready, terminating, no node", []*discoveryv1.EndpointSlice{{Endpoints: []discoveryv1.Endpoint{
			ep("n2", &yes, nil), ep("n1", nil, nil), ep("n3", &no, nil), ep("n4", &yes, &yes), ep("", &yes, nil)}}},
			[]string{"n1", "n2"}},
		{"several slices, duplicates", []*discoveryv1.EndpointSlice{
			{Endpoints: []discoveryv1.Endpoint{ep("n1", &yes, nil), ep("n1", &yes, nil)}},
			nil,
			{Endpoints: []discoveryv1.Endpoint{ep("n1", &yes, nil), ep("n5", &yes, &no)}}},
			[]string{"n1", "n5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ReadyNodes(tc.slices); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestLabelsHash(t *testing.T) {
	a := LabelsHash(map[string]string{"team": "a", "x": "y"})
	if a != LabelsHash(map[string]string{"x": "y", "team": "a"}) {
		t.Fatal("hash depends on map order")
	}
	for _, other := range []map[string]string{nil, {"team": "b", "x": "y"}, {"team": "a"}, {"teamx": "y", "": "a"}} {
		if LabelsHash(other) == a {
			t.Fatalf("%v hashes like the original", other)
		}
	}
}
