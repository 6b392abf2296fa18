package framework

import (
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestCreateClusterArgs(t *testing.T) {
	tools := Tools{
		Etcd: "/t/etcd", KubeAPIServer: "/t/kube-apiserver", KubeControllerManager: "/t/kcm",
		KubeScheduler: "/t/kube-scheduler", Kwok: "/t/kwok", Kwokctl: "/t/kwokctl",
	}
	args := createClusterArgs(ClusterOptions{
		Name: "azccm-1", WorkDir: "/w/kwok", Kubeconfig: "/w/kubeconfig", Tools: tools, KubeVersion: "v1.37.2",
		ExtraArgs: []string{"kube-apiserver=v=4"}, Wait: time.Minute,
	})
	for _, want := range []string{
		"--config=/w/kwok/kwokctl-azccm-1.yaml",
		"--name=azccm-1",
		"--runtime=binary",
		"--kubeconfig=/w/kubeconfig",
		"--etcd-binary=/t/etcd",
		"--kube-apiserver-binary=/t/kube-apiserver",
		"--kube-controller-manager-binary=/t/kcm",
		"--kube-scheduler-binary=/t/kube-scheduler",
		"--kwok-controller-binary=/t/kwok",
		"--wait=1m0s",
		"--extra-args=kube-controller-manager=cloud-provider=external",
		"--extra-args=kube-apiserver=v=4",
		"--extra-args=kwok-controller=manage-all-nodes=false",
		"--extra-args=kwok-controller=manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("args lack %q: %v", want, args)
		}
	}
	if args[0] != "create" || args[1] != "cluster" {
		t.Errorf("not a create cluster command: %v", args[:2])
	}
}

// TestKCMHasNoCloudLoops guards the assumption of CloudControllers: if a new Kubernetes version
// brought cloud loops back into kube-controller-manager, the cluster would need them disabled.
func TestKCMHasNoCloudLoops(t *testing.T) {
	tools := RequireTools(t)
	out, err := exec.Command(tools.KubeControllerManager, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("kube-controller-manager --help: %v\n%s", err, out)
	}
	help := string(out)
	if !strings.Contains(help, "All controllers:") || !strings.Contains(help, "endpointslice-controller") {
		t.Fatalf("cannot find the controller list in kube-controller-manager --help:\n%s", help)
	}
	for _, c := range CloudControllers {
		if strings.Contains(help, c) {
			t.Errorf("kube-controller-manager has %s again: disable it in the cluster's --controllers", c)
		}
	}
}

func TestKwokctlConfigFixesEveryPort(t *testing.T) {
	p := ClusterPorts{Etcd: 1, EtcdPeer: 2, KubeAPIServer: 3, KubeControllerManager: 4, KubeScheduler: 5, KwokController: 6}
	got := kwokctlConfig(p)
	for _, want := range []string{
		"kind: KwokctlConfiguration", "etcdPort: 1\n", "etcdPeerPort: 2\n", "kubeApiserverPort: 3\n",
		"kubeControllerManagerPort: 4\n", "kubeSchedulerPort: 5\n", "kwokControllerPort: 6\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("config lacks %q:\n%s", want, got)
		}
	}
}

func TestAllocatePorts(t *testing.T) {
	p := ClusterPorts{KubeAPIServer: 6443}
	if err := allocatePorts(&p); err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, port := range p.all() {
		if *port <= 0 || seen[*port] {
			t.Errorf("port %d is zero or repeated in %+v", *port, p)
		}
		seen[*port] = true
	}
	if p.KubeAPIServer != 6443 {
		t.Errorf("a given port was replaced: %d", p.KubeAPIServer)
	}
}

func TestParseCmdlineAndMentions(t *testing.T) {
	for _, tc := range []struct {
		raw    string
		want   []string
		marker string
		match  bool
	}{
		{"", nil, "x", false},
		{"etcd\x00--data-dir=/tmp/azccm-1/kwok\x00", []string{"etcd", "--data-dir=/tmp/azccm-1/kwok"}, "/tmp/azccm-1", true},
		{"bash\x00-c\x00sleep 1", []string{"bash", "-c", "sleep 1"}, "/tmp/azccm-1", false},
		{"/tmp/azccm-1/bin/kwok\x00", []string{"/tmp/azccm-1/bin/kwok"}, "", false},
	} {
		got := parseCmdline([]byte(tc.raw))
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseCmdline(%q) = %q, want %q", tc.raw, got, tc.want)
		}
		if m := mentions(got, tc.marker); m != tc.match {
			t.Errorf("mentions(%q, %q) = %v, want %v", got, tc.marker, m, tc.match)
		}
	}
}

func TestParseVersionsEnv(t *testing.T) {
	got := parseVersionsEnv([]byte("# comment\nKUBERNETES_VERSION=v1.37.2\n\n  KWOK_VERSION = \"v0.8.0\"\nnot a pair\n"))
	want := map[string]string{"KUBERNETES_VERSION": "v1.37.2", "KWOK_VERSION": "v0.8.0"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseVersionsEnv = %v, want %v", got, want)
	}
	if v := PinnedVersions()["KUBERNETES_VERSION"]; !strings.HasPrefix(v, "v1.") {
		t.Errorf("hack/versions.env KUBERNETES_VERSION = %q", v)
	}
}

func TestNewNode(t *testing.T) {
	m := Machine{NodeName: "vmss000001", ProviderID: "azure:///subscriptions/s/x", InternalIPs: []string{"10.0.0.5", "fd00::5"}}
	hasTaint := func(n *corev1.Node) bool {
		return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
			return t.Key == UninitializedTaintKey && t.Effect == corev1.TaintEffectNoSchedule
		})
	}
	for _, tc := range []struct {
		name       string
		opts       NodeOptions
		providerID string
		taint      bool
		nodeIP     string
	}{
		{"external cloud provider kubelet", NodeOptions{}, "", true, ""},
		{"kubelet with --provider-id", NodeOptions{ProviderID: true}, m.ProviderID, true, ""},
		{"initialized, with --node-ip", NodeOptions{Initialized: true, NodeIP: true}, "", false, "10.0.0.5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := NewNode(m, tc.opts)
			if n.Name != m.NodeName || n.Spec.ProviderID != tc.providerID {
				t.Errorf("name %q providerID %q", n.Name, n.Spec.ProviderID)
			}
			if hasTaint(n) != tc.taint {
				t.Errorf("uninitialized taint = %v, want %v", hasTaint(n), tc.taint)
			}
			if got := n.Annotations[ProvidedNodeIPAnno]; got != tc.nodeIP {
				t.Errorf("provided node IP = %q, want %q", got, tc.nodeIP)
			}
			if n.Annotations[KwokNodeAnnotation] != "fake" {
				t.Error("kwok would not manage the node")
			}
			for _, l := range []string{"topology.kubernetes.io/zone", "topology.kubernetes.io/region", "node.kubernetes.io/instance-type"} {
				if _, ok := n.Labels[l]; ok {
					t.Errorf("kubelet with an external cloud provider does not set %s", l)
				}
			}
			var ips []string
			for _, a := range n.Status.Addresses {
				if a.Type == corev1.NodeInternalIP {
					ips = append(ips, a.Address)
				}
			}
			if !reflect.DeepEqual(ips, m.InternalIPs) {
				t.Errorf("InternalIPs %v, want %v", ips, m.InternalIPs)
			}
		})
	}
}

func TestMergeConfig(t *testing.T) {
	base := map[string]any{"cloud": "AzureStackCloud", "vmType": "vmss", "loadBalancerSku": "standard"}
	for _, tc := range []struct {
		name      string
		overrides map[string]any
		want      map[string]any
	}{
		{"no overrides", nil, base},
		{"replace and add", map[string]any{"vmType": "standard", "maximumLoadBalancerRuleCount": 10},
			map[string]any{"cloud": "AzureStackCloud", "vmType": "standard", "loadBalancerSku": "standard", "maximumLoadBalancerRuleCount": 10}},
		{"nil deletes", map[string]any{"loadBalancerSku": nil}, map[string]any{"cloud": "AzureStackCloud", "vmType": "vmss"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mergeConfig(base, tc.overrides); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("mergeConfig = %v, want %v", got, tc.want)
			}
		})
	}
	if base["loadBalancerSku"] != "standard" {
		t.Error("mergeConfig modified its input")
	}
}
