package placement

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/internal/config"
)

func bp(b bool) *bool { return &b }

func sel(k, v string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
}

// three is the e2e's shape: a default, one for team=a services, one drained.
func three(t *testing.T) []Config {
	t.Helper()
	cfgs, err := Compile([]config.MultipleStandardLoadBalancerConfiguration{
		{Name: "kubernetes", PrimaryVMSet: "pool0"},
		{Name: "lb-a", PrimaryVMSet: "pool1", ServiceLabelSelector: sel("team", "a"), NodeSelector: sel("lb", "a")},
		{Name: "lb-b", PrimaryVMSet: "pool2", ServiceNamespaceSelector: sel("env", "prod"), AutoPlaceServices: bp(false)},
		{Name: "lb-drain", PrimaryVMSet: "pool3", AllowServicePlacement: bp(false)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return cfgs
}

func TestCompileErrorsNameTheKey(t *testing.T) {
	_, err := Compile([]config.MultipleStandardLoadBalancerConfiguration{{Name: "x",
		NodeSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Bogus"}}}}})
	if err == nil || !strings.Contains(err.Error(), "multipleStandardLoadBalancerConfigurations[0].nodeSelector") {
		t.Fatalf("got %v", err)
	}
}

func TestValidateClusterName(t *testing.T) {
	c := &config.Config{MultipleStandardLoadBalancerConfigurations: []config.MultipleStandardLoadBalancerConfiguration{{Name: "Kubernetes"}}}
	if err := config.ValidateMultiSLBClusterName(c, "kubernetes"); err != nil {
		t.Fatal(err)
	}
	if err := config.ValidateMultiSLBClusterName(c, "other"); err == nil || !strings.Contains(err.Error(), "multipleStandardLoadBalancerConfigurations") {
		t.Fatalf("got %v", err)
	}
	if err := config.ValidateMultiSLBClusterName(&config.Config{}, "other"); err != nil {
		t.Fatal(err)
	}
}

func TestEligible(t *testing.T) {
	cfgs := three(t)
	for _, tc := range []struct {
		name    string
		svc     Service
		want    []string
		wantErr string
	}{
		{name: "plain service: selector-less entries that allow auto placement", svc: Service{Key: "d/s"}, want: []string{"kubernetes"}},
		{name: "label selector matches: selector-less entries become fallback",
			svc: Service{Key: "d/s", Labels: map[string]string{"team": "a"}}, want: []string{"lb-a"}},
		{name: "already on the selector-less default: it stays eligible",
			svc: Service{Key: "d/s", Labels: map[string]string{"team": "a"}, Current: "kubernetes"}, want: []string{"kubernetes", "lb-a"}},
		{name: "autoPlace false: only by annotation",
			svc: Service{Key: "d/s", NamespaceLabels: map[string]string{"env": "prod"}}, want: []string{"kubernetes"}},
		{name: "annotation names the autoPlace=false entry",
			svc: Service{Key: "d/s", NamespaceLabels: map[string]string{"env": "prod"}, Requested: []string{"lb-b"}}, want: []string{"lb-b"}},
		{name: "annotation but namespace selector does not match",
			svc: Service{Key: "d/s", Requested: []string{"lb-b"}}, wantErr: "lb-b: serviceNamespaceSelector does not match"},
		{name: "annotation of unknown names", svc: Service{Key: "d/s", Requested: []string{"nope"}}, wantErr: "none of which is configured"},
		{name: "annotation names several: all eligible ones",
			svc: Service{Key: "d/s", Requested: []string{"kubernetes", "lb-a", "nope"}, Labels: map[string]string{"team": "a"}}, want: []string{"lb-a"}},
		{name: "allowServicePlacement false: no new service", svc: Service{Key: "d/s", Requested: []string{"lb-drain"}},
			wantErr: "lb-drain: allowServicePlacement is false"},
		{name: "allowServicePlacement false: services there stay", svc: Service{Key: "d/s", Current: "lb-drain"},
			want: []string{"kubernetes", "lb-drain"}},
		{name: "label selector no longer matches the current one", svc: Service{Key: "d/s", Current: "lb-a"}, want: []string{"kubernetes"}},
		{name: "a full load balancer takes no new service", svc: Service{Key: "d/s", Full: map[string]string{"kubernetes": "8 private link services"}},
			wantErr: "kubernetes: 8 private link services"},
		{name: "a service already on a full load balancer stays", svc: Service{Key: "d/s", Current: "kubernetes", Full: map[string]string{"kubernetes": "full"}},
			want: []string{"kubernetes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Eligible(cfgs, tc.svc)
			if tc.wantErr != "" {
				var ne *NoEligibleError
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.As(err, &ne) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestPlace(t *testing.T) {
	cfgs, err := Compile([]config.MultipleStandardLoadBalancerConfiguration{
		{Name: "kubernetes"}, {Name: "lb2"}, {Name: "lb3", ServiceLabelSelector: sel("x", "y")}, {Name: "lb4", AllowServicePlacement: bp(false)},
	})
	if err != nil {
		t.Fatal(err)
	}
	shared := []string{"load balancing rule ab-TCP-80"}
	for _, tc := range []struct {
		name    string
		svc     Service
		rules   map[string]int
		limit   RuleLimit
		want    Decision
		wantErr error  // the error's type
		wantMsg string // in the message
	}{
		{name: "fewest rules", svc: Service{Key: "a/1"}, rules: map[string]int{"kubernetes": 5, "lb2": 2}, want: Decision{Name: "lb2"}},
		{name: "ties go to the first configured", svc: Service{Key: "a/1"}, rules: map[string]int{"kubernetes": 2, "lb2": 2}, want: Decision{Name: "kubernetes"}},
		{name: "missing LB counts as empty", svc: Service{Key: "a/1"}, rules: map[string]int{"kubernetes": 2}, want: Decision{Name: "lb2"}},
		{name: "stable: stays although another has fewer rules", svc: Service{Key: "a/1", Current: "kubernetes", Holder: "kubernetes"},
			rules: map[string]int{"kubernetes": 50, "lb2": 0}, want: Decision{Name: "kubernetes"}},
		{name: "ineligible now: moves to fewest rules", svc: Service{Key: "a/1", Current: "lb3", Holder: "lb3"},
			rules: map[string]int{"kubernetes": 50, "lb2": 3}, want: Decision{Name: "lb2", Moved: true, From: "lb3"}},
		{name: "ineligible now with a requested IP nobody else uses: moves with it", svc: Service{Key: "a/1", Current: "lb3", Holder: "lb3", PinsIP: true},
			rules: map[string]int{"kubernetes": 50, "lb2": 3}, want: Decision{Name: "lb2", Moved: true, From: "lb3"}},

		// Shared IPs.
		{name: "a new service asking for an IP goes where the IP is", svc: Service{Key: "a/2", PinsIP: true, Holder: "kubernetes"},
			rules: map[string]int{"kubernetes": 9}, want: Decision{Name: "kubernetes"}},
		{name: "joining an IP on a drained load balancer", svc: Service{Key: "a/2", PinsIP: true, Holder: "lb4"},
			want: Decision{Name: "lb4"}},
		{name: "the IP is on a load balancer the service may not use: refused", svc: Service{Key: "a/2", PinsIP: true, Holder: "lb3"},
			wantErr: &IPElsewhereError{}, wantMsg: `service "2" specifies an IP that resides on load balancer "lb3", which is not in the eligible set [kubernetes lb2]`},
		{name: "an internal service's IP on an ineligible load balancer: the internal one is named", svc: Service{Key: "a/2", PinsIP: true, Holder: "lb3", Internal: true},
			wantErr: &IPElsewhereError{}, wantMsg: `resides on load balancer "lb3-internal"`},
		{name: "a frontend others use does not leave: refused", svc: Service{Key: "a/1", Current: "lb3", Holder: "lb3", SharedFrontend: "a1", SharedBy: shared},
			rules:   map[string]int{"kubernetes": 50, "lb2": 3},
			wantErr: &MoveRefusedError{}, wantMsg: `service "1" cannot migrate from load balancer "lb3" to "lb2" because frontend IP "a1" is also referenced by other resources: load balancing rule ab-TCP-80`},
		{name: "the IP asked for moved to another load balancer: the service follows it", svc: Service{Key: "a/1", Current: "kubernetes", Holder: "lb2", PinsIP: true},
			want: Decision{Name: "lb2", Moved: true, From: "kubernetes"}},
		{name: "…unless its frontend where it is has other users", svc: Service{Key: "a/1", Current: "kubernetes", Holder: "lb2", PinsIP: true, SharedFrontend: "a1", SharedBy: shared},
			wantErr: &MoveRefusedError{}, wantMsg: `from load balancer "kubernetes" to "lb2"`},
		{name: "a shared frontend that stays eligible stays", svc: Service{Key: "a/1", Current: "lb2", Holder: "lb2", PinsIP: true, SharedFrontend: "a1", SharedBy: shared},
			rules: map[string]int{"kubernetes": 0, "lb2": 50}, want: Decision{Name: "lb2"}},
		{name: "no eligible configuration at all: nothing moves", svc: Service{Key: "a/1", Current: "lb3", Holder: "lb3", Requested: []string{"lb3"}, SharedBy: shared},
			wantErr: &NoEligibleError{}, wantMsg: "lb3: serviceLabelSelector does not match the service"},

		// The configurations annotation with a requested IP.
		{name: "annotation and a requested IP: refused", svc: Service{Key: "ns/web", Requested: []string{"lb2"}, PinsIP: true},
			wantErr: &ConflictError{}, wantMsg: `service "web" has conflicting load balancer configuration: both a load balancer name (service.beta.kubernetes.io/azure-load-balancer-configurations) and an IP address are specified`},
		{name: "…even where the IP is", svc: Service{Key: "ns/web", Requested: []string{"kubernetes"}, PinsIP: true, Holder: "kubernetes", Current: "kubernetes"},
			wantErr: &ConflictError{}, wantMsg: "has conflicting load balancer configuration"},
		{name: "annotation without a requested IP", svc: Service{Key: "a/1", Requested: []string{"lb2"}}, want: Decision{Name: "lb2"}},

		// The rule limit (Azure's, per Standard load balancer).
		{name: "rule limit: the one with fewest rules is skipped when the service does not fit", svc: Service{Key: "a/1"},
			rules: map[string]int{"kubernetes": 8, "lb2": 9}, limit: RuleLimit{Max: 10, Need: 2}, want: Decision{Name: "kubernetes"}},
		{name: "rule limit: exactly full fits", svc: Service{Key: "a/1"},
			rules: map[string]int{"kubernetes": 9, "lb2": 9}, limit: RuleLimit{Max: 10, Need: 1}, want: Decision{Name: "kubernetes"}},
		{name: "rule limit: no room anywhere", svc: Service{Key: "a/1"},
			rules: map[string]int{"kubernetes": 10, "lb2": 9}, limit: RuleLimit{Max: 10, Need: 2}, wantErr: &RuleLimitError{},
			wantMsg: "service a/1 needs 2 load balancing rules, but no eligible load balancer has room for them under Azure's limit of 10 per Standard load balancer (kubernetes has 10, lb2 has 9)"},
		{name: "rule limit: a placed service stays on a full load balancer", svc: Service{Key: "a/1", Current: "kubernetes"},
			rules: map[string]int{"kubernetes": 10, "lb2": 0}, limit: RuleLimit{Max: 10, Need: 1}, want: Decision{Name: "kubernetes"}},
		{name: "rule limit: joining an IP is not limited here (the write is checked)", svc: Service{Key: "a/2", PinsIP: true, Holder: "kubernetes"},
			rules: map[string]int{"kubernetes": 10}, limit: RuleLimit{Max: 10, Need: 1}, want: Decision{Name: "kubernetes"}},
		{name: "rule limit: a move goes only where there is room", svc: Service{Key: "a/1", Current: "lb3"},
			rules: map[string]int{"kubernetes": 2, "lb2": 9}, limit: RuleLimit{Max: 10, Need: 3}, want: Decision{Name: "kubernetes", Moved: true, From: "lb3"}},
		{name: "rule limit 0: no limit", svc: Service{Key: "a/1"},
			rules: map[string]int{"kubernetes": 1000, "lb2": 999}, want: Decision{Name: "lb2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Place(cfgs, tc.svc, tc.rules, tc.limit)
			if tc.wantErr != nil {
				if err == nil || !strings.Contains(err.Error(), tc.wantMsg) || reflect.TypeOf(err) != reflect.TypeOf(tc.wantErr) {
					t.Fatalf("error %v (%T), want a %T with %q", err, err, tc.wantErr, tc.wantMsg)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestNodeCandidates(t *testing.T) {
	cfgs, err := Compile([]config.MultipleStandardLoadBalancerConfiguration{
		{Name: "kubernetes", PrimaryVMSet: "pool0"},
		{Name: "lb2", PrimaryVMSet: "pool2", NodeSelector: sel("lb", "2")},
		{Name: "lb3", PrimaryVMSet: "pool3", NodeSelector: sel("zone", "z")},
		{Name: "lb4", NodeSelector: &metav1.LabelSelector{}}, // empty: no selector
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		node Node
		want []string
	}{
		{"primary VM set wins over selectors", Node{VMSet: "POOL3", Labels: map[string]string{"lb": "2"}}, []string{"lb3"}},
		{"matching selectors", Node{VMSet: "other", Labels: map[string]string{"lb": "2", "zone": "z"}}, []string{"lb2", "lb3"}},
		{"no selector matches: entries without selector", Node{Labels: map[string]string{"lb": "9"}}, []string{"kubernetes", "lb4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NodeCandidates(cfgs, tc.node); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPlaceNodes(t *testing.T) {
	cfgs, err := Compile([]config.MultipleStandardLoadBalancerConfiguration{
		{Name: "kubernetes"}, {Name: "lb2"}, {Name: "lb3", NodeSelector: sel("only", "3")},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		nodes    []Node
		want     map[string]string
		unplaced []string
	}{
		{name: "fewest nodes, in name order",
			nodes: []Node{{Name: "n3"}, {Name: "n1"}, {Name: "n2"}},
			want:  map[string]string{"n1": "kubernetes", "n2": "lb2", "n3": "kubernetes"}},
		{name: "placed nodes stay and count",
			nodes: []Node{{Name: "n1", Current: "lb2"}, {Name: "n2", Current: "lb2"}, {Name: "n3"}},
			want:  map[string]string{"n1": "lb2", "n2": "lb2", "n3": "kubernetes"}},
		{name: "label change: the node moves to the selector's LB",
			nodes: []Node{{Name: "n1", Current: "kubernetes", Labels: map[string]string{"only": "3"}}},
			want:  map[string]string{"n1": "lb3"}},
		{name: "current placement of an unknown LB is ignored",
			nodes: []Node{{Name: "n1", Current: "gone"}}, want: map[string]string{"n1": "kubernetes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, unplaced := PlaceNodes(cfgs, tc.nodes)
			if !reflect.DeepEqual(got, tc.want) || !reflect.DeepEqual(unplaced, tc.unplaced) {
				t.Fatalf("got %v unplaced %v; want %v unplaced %v", got, unplaced, tc.want, tc.unplaced)
			}
		})
	}
	only, _ := Compile([]config.MultipleStandardLoadBalancerConfiguration{{Name: "a", NodeSelector: sel("x", "y")}})
	if got, unplaced := PlaceNodes(only, []Node{{Name: "n"}}); len(got) != 0 || !reflect.DeepEqual(unplaced, []string{"n"}) {
		t.Fatalf("got %v unplaced %v", got, unplaced)
	}
}

func TestConfigName(t *testing.T) {
	cfgs := three(t)
	for lb, want := range map[string]string{"kubernetes": "kubernetes", "LB-A-internal": "lb-a", "lb-x": "", "lb-a-internal-internal": ""} {
		if got := ConfigName(cfgs, lb); got != want {
			t.Errorf("ConfigName(%q) = %q, want %q", lb, got, want)
		}
	}
}
