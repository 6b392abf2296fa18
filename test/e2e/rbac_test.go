package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/azure-ccm/azure-ccm/deploy/azure"
	"github.com/azure-ccm/azure-ccm/internal/azsim/control"
	"github.com/azure-ccm/azure-ccm/test/framework"
	"github.com/azure-ccm/azure-ccm/test/framework/azurenames"
)

const (
	rbacNamespace = "kube-system"
	rbacCCMSA     = "azure-cloud-controller-manager"
	rbacNodeMgrSA = "azure-cloud-node-manager"
)

// rbacRender returns the given templates of the chart as `helm template` renders them with
// default values. Without helm (it is installed by hack/verify-deploy.sh) the generated
// deploy/manifests are used: verify-deploy checks they equal that rendering.
func rbacRender(t *testing.T, templates ...string) []byte {
	t.Helper()
	return rbacRenderWith(t, nil, templates...)
}

// rbacRenderWith renders with helm --set values; without helm only default values can be used.
func rbacRenderWith(t *testing.T, sets []string, templates ...string) []byte {
	t.Helper()
	root := framework.RepoRoot()
	helm := filepath.Join(framework.ToolsDir(), "helm")
	if _, err := os.Stat(helm); err != nil && len(sets) > 0 {
		if framework.InCI() {
			t.Fatalf("helm missing (hack/verify-deploy.sh installs it): %v", err)
		}
		t.Skipf("helm missing (run hack/verify-deploy.sh) to render the chart with %v", sets)
	}
	if _, err := os.Stat(helm); err == nil {
		args := []string{"template", "azure-ccm", filepath.Join(root, "deploy", "chart", "azure-ccm"),
			"--namespace", rbacNamespace, "--kube-version", framework.PinnedVersions()["KUBERNETES_VERSION"]}
		for _, s := range sets {
			args = append(args, "--set", s)
		}
		for _, tpl := range templates {
			args = append(args, "--show-only", "templates/"+tpl)
		}
		out, err := exec.Command(helm, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	t.Logf("no helm in %s: using deploy/manifests (kept equal to the chart by hack/verify-deploy.sh)", framework.ToolsDir())
	var all []byte
	for _, f := range templates {
		b, err := os.ReadFile(filepath.Join(root, "deploy", "manifests", f))
		if err != nil {
			t.Fatal(err)
		}
		all = append(append(all, b...), []byte("\n---\n")...)
	}
	return all
}

// rbacChartArgs returns the CCM container's arguments of the chart's Deployment, without the
// ones that name in-cluster paths and ports (the framework supplies those): the test runs the
// binary with the flags the chart gives it.
func rbacChartArgs(t *testing.T) []string {
	t.Helper()
	var d appsv1.Deployment
	if err := yaml.Unmarshal(rbacRender(t, "ccm-deployment.yaml"), &d); err != nil {
		t.Fatal(err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != "cloud-controller-manager" {
			continue
		}
		var args []string
		for _, a := range c.Args {
			if !strings.HasPrefix(a, "--cloud-config=") && !strings.HasPrefix(a, "--secure-port=") {
				args = append(args, a)
			}
		}
		if len(args) < 10 {
			t.Fatalf("the chart's CCM has only %d arguments: %v", len(args), c.Args)
		}
		return args
	}
	t.Fatal("no cloud-controller-manager container in the chart's Deployment")
	return nil
}

// rbacApply applies rendered manifests as the cluster admin.
func rbacApply(t *testing.T, e *framework.Env, manifests []byte) {
	t.Helper()
	if err := e.Apply(context.Background(), manifests); err != nil {
		t.Fatal(err)
	}
}

// rbacToken asks the TokenRequest API for a token of the service account.
func rbacToken(t *testing.T, e *framework.Env, sa string) string {
	t.Helper()
	expiry := int64(3600)
	tr, err := e.Kube.CoreV1().ServiceAccounts(rbacNamespace).CreateToken(context.Background(), sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s: %v", sa, err)
	}
	return tr.Status.Token
}

// rbacKubeconfig writes a kubeconfig that authenticates with token only (no client cert).
func rbacKubeconfig(t *testing.T, e *framework.Env, name, token string) string {
	t.Helper()
	ca := e.RestConfig.CAData
	if len(ca) == 0 && e.RestConfig.CAFile != "" {
		var err error
		if ca, err = os.ReadFile(e.RestConfig.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: e.RestConfig.Host, CertificateAuthorityData: ca,
		InsecureSkipTLSVerify: len(ca) == 0}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: name}
	cfg.CurrentContext = name
	path := filepath.Join(e.Dir, name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// rbacForbidden finds RBAC denials in a log: client-go reflectors, event sinks and leader
// election all print the API server's "... is forbidden: User ... cannot ..." message.
var rbacForbidden = regexp.MustCompile(`(?i)forbidden|cannot (get|list|watch|create|update|patch|delete) resource`)

// TestRBAC renders the chart's RBAC, applies it, and runs the CCM under its ServiceAccount only
// (token from the TokenRequest API; delegated authn/authz through the same identity) with
// every controller on: nodes are initialised, routes created, a deleted VM's node removed,
// a LoadBalancer service gets its IP (nodeIP backend pool) and is deleted, an
// externalTrafficPolicy: Local service is placed by a serviceNamespaceSelector and its
// dedicated pool follows its pod (namespace and EndpointSlice informers), leader election
// holds the Lease, /healthz is open and /metrics served to authorised clients only, every ARM
// call is allowed by the custom Azure role, and the CCM log has no "forbidden".
func TestRBAC(t *testing.T) {
	working(t)
	nodesRequireBinary(t, framework.CCMBinaryName)
	cloudConfig := map[string]any{
		"loadBalancerBackendPoolConfigurationType": "nodeIP",
		"vmCacheTTLInSeconds":                      2,
		"vmssVirtualMachinesCacheTTLInSeconds":     2,
	}
	// Multiple load balancers with a namespace selector: the namespace informer and the
	// local-pools controller (EndpointSlices) run under the chart's role too.
	maps.Copy(cloudConfig, rbacMultiSLBConfig)
	e := framework.Start(t, framework.Options{CloudConfig: cloudConfig})
	if len(e.Machines) < 3 {
		t.Fatalf("default topology has %d machines, want 3", len(e.Machines))
	}
	ctx := context.Background()
	rbacApply(t, e, rbacRender(t, "ccm-rbac.yaml", "node-manager-rbac.yaml", "metrics-reader-rbac.yaml"))

	saKubeconfig, saKube := rbacCCMClient(t, e)
	// The identity really is restricted: anything outside the role is denied.
	if _, err := saKube.CoreV1().Secrets(rbacNamespace).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the CCM identity can list secrets (err=%v): it is not the restricted ServiceAccount", err)
	}

	podCIDRs := map[string]string{}
	for i, m := range e.Machines {
		podCIDRs[m.NodeName] = fmt.Sprintf("10.244.%d.0/24", i)
		nodesCreate(t, e, m, podCIDRs[m.NodeName], nil)
	}

	// The chart's flags, then the ServiceAccount's kubeconfig everywhere; /metrics is not in
	// always-allow, so it goes through delegated authorization; routes on (the chart's default
	// is off) so that the route controller's RBAC is exercised too.
	args := append(rbacChartArgs(t),
		"--kubeconfig="+saKubeconfig,
		"--authentication-kubeconfig="+saKubeconfig,
		"--authorization-kubeconfig="+saKubeconfig,
		"--authorization-always-allow-paths=/healthz,/readyz,/livez",
		"--configure-cloud-routes=true",
		"--cluster-cidr=10.244.0.0/16",
	)
	t.Logf("CCM flags: %v", args)
	e.StartCCM(args...)

	t.Run("leader election", func(t *testing.T) {
		e.WaitFor("lease held", func(ctx context.Context) (bool, error) {
			l, err := e.Kube.CoordinationV1().Leases(rbacNamespace).Get(ctx, "cloud-controller-manager", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", fmt.Errorf("no holder")
		}, time.Minute)
	})

	t.Run("nodes initialised and routes created", func(t *testing.T) {
		for _, m := range e.Machines {
			e.WaitFor("node "+m.NodeName+" initialised", e.NodeInitialized(m.NodeName), 2*time.Minute)
		}
		e.WaitFor("a route per node", func(ctx context.Context) (bool, error) {
			names, err := nodesRouteTable(ctx, e)
			if err != nil {
				return false, err
			}
			have := map[string]bool{}
			for _, n := range names {
				have[n] = true
			}
			for node, cidr := range podCIDRs {
				if !have[azurenames.RouteName(node, cidr)] {
					return false, fmt.Errorf("route of %s missing (have %v)", node, names)
				}
			}
			return true, nil
		}, 2*time.Minute)
	})

	t.Run("LoadBalancer service gets its IP", func(t *testing.T) {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "rbac-lb", Namespace: "default"},
			Spec: corev1.ServiceSpec{
				Type:     corev1.ServiceTypeLoadBalancer,
				Selector: map[string]string{"app": "rbac-lb"},
				Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
			},
		}
		if _, err := e.Kube.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.WaitFor("service ingress IP", e.ServiceIngress("default", "rbac-lb"), 2*time.Minute)
		// Events are written with the ServiceAccount too.
		e.WaitFor("EnsuredLoadBalancer event", func(ctx context.Context) (bool, error) {
			evs, err := e.Kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=rbac-lb"})
			if err != nil {
				return false, err
			}
			for _, ev := range evs.Items {
				if ev.Reason == "EnsuredLoadBalancer" {
					return true, nil
				}
			}
			return false, fmt.Errorf("no EnsuredLoadBalancer event among %d", len(evs.Items))
		}, time.Minute)
	})

	t.Run("Local service on a namespace-selected load balancer: pool follows its pod", func(t *testing.T) {
		rbacLocalServiceOnSelectedLB(t, e)
	})

	t.Run("deleted service: finalizer removed", func(t *testing.T) {
		if err := e.Kube.CoreV1().Services("default").Delete(ctx, "rbac-lb", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		e.WaitFor("service gone (the CCM removed its finalizer)", func(ctx context.Context) (bool, error) {
			_, err := e.Kube.CoreV1().Services("default").Get(ctx, "rbac-lb", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, fmt.Errorf("service still there (err=%v)", err)
		}, 2*time.Minute)
	})

	t.Run("deleted VM: node removed", func(t *testing.T) {
		m := e.Machines[len(e.Machines)-1]
		if err := e.Azure.Server.VMAction(ctx, control.VMAction{ID: m.ResourceID, Action: "delete"}); err != nil {
			t.Fatal(err)
		}
		nodesMakeNotReady(t, e, m.NodeName)
		e.WaitFor("node "+m.NodeName+" deleted", func(ctx context.Context) (bool, error) {
			if _, err := nodesGet(ctx, e, m.NodeName); err == nil {
				_, _ = nodesSetNotReady(ctx, e, m.NodeName)
				return false, fmt.Errorf("node still exists")
			}
			return true, nil
		}, 90*time.Second)
	})

	t.Run("metrics behind delegated authn and authz", func(t *testing.T) {
		base := fmt.Sprintf("https://127.0.0.1:%d/metrics", e.CCMPort())
		// The cluster admin's client certificate: authenticated with the client CA read from
		// extension-apiserver-authentication, authorised by a SubjectAccessReview.
		adminTLS, err := rest.TLSConfigFor(e.RestConfig)
		if err != nil {
			t.Fatal(err)
		}
		adminTLS.RootCAs, adminTLS.InsecureSkipVerify = nil, true // the CCM's serving cert is self-signed
		admin := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: adminTLS}}
		e.WaitFor("admin reads /metrics", func(ctx context.Context) (bool, error) {
			code, body, err := rbacGet(ctx, admin, base, "")
			if err != nil {
				return false, err
			}
			if code != http.StatusOK || !strings.Contains(body, "azure_ccm_arm_requests_total") {
				return false, fmt.Errorf("status %d, ARM metrics present=%v", code, strings.Contains(body, "azure_ccm_arm_requests_total"))
			}
			return true, nil
		}, 30*time.Second)
		plain := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		// The kubelet probes /healthz without credentials.
		code, body, err := rbacGet(ctx, plain, strings.TrimSuffix(base, "/metrics")+"/healthz", "")
		if err != nil || code != http.StatusOK || body != "ok" {
			t.Errorf("anonymous /healthz: %d %q %v, want 200 ok", code, body, err)
		}
		// The node manager's token is valid (TokenReview) but may not read /metrics.
		token := rbacToken(t, e, rbacNodeMgrSA)
		e.WaitFor("unauthorised token gets 403", func(ctx context.Context) (bool, error) {
			code, _, err := rbacGet(ctx, plain, base, token)
			if err != nil {
				return false, err
			}
			return code == http.StatusForbidden, fmt.Errorf("status %d, want 403", code)
		}, 30*time.Second)
		// A Prometheus ServiceAccount bound to the chart's metrics reader role may.
		if _, err := e.Kube.CoreV1().ServiceAccounts(rbacNamespace).Create(ctx, &corev1.ServiceAccount{
			ObjectMeta: metav1.ObjectMeta{Name: "prometheus"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "prometheus-azure-ccm"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "azure-ccm-metrics-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: rbacNamespace}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		promToken := rbacToken(t, e, "prometheus")
		e.WaitFor("metrics reader token gets 200", func(ctx context.Context) (bool, error) {
			code, body, err := rbacGet(ctx, plain, base, promToken)
			if err != nil {
				return false, err
			}
			return code == http.StatusOK && strings.Contains(body, "azure_ccm_arm_requests_total"), fmt.Errorf("status %d", code)
		}, 30*time.Second)
	})

	// Every ARM call the CCM made in this test maps to an action of the custom role of
	// docs/azure-permissions.md (joins, which ARM checks on referenced resources, are not
	// visible as calls and are covered by the doc's per-feature tables).
	t.Run("ARM calls are covered by the custom role", func(t *testing.T) { rbacCheckRoleCovers(t, e, "azure-ccm", 10) })

	if out, err := os.ReadFile(e.CCMLogPath()); err != nil {
		t.Fatal(err)
	} else if lines := rbacForbiddenLines(string(out)); len(lines) > 0 {
		t.Errorf("the CCM was denied by RBAC (%d lines), e.g.:\n%s", len(lines), strings.Join(lines[:min(5, len(lines))], "\n"))
	}
}

// rbacCCMClient returns a kubeconfig and a client for the CCM's ServiceAccount, once the applied
// role lets it list nodes.
func rbacCCMClient(t *testing.T, e *framework.Env) (string, *kubernetes.Clientset) {
	t.Helper()
	kubeconfig := rbacKubeconfig(t, e, rbacCCMSA, rbacToken(t, e, rbacCCMSA))
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	e.WaitFor("RBAC applied: the CCM identity may list nodes", func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, err
	}, 30*time.Second)
	return kubeconfig, kube
}

func rbacForbiddenLines(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if rbacForbidden.MatchString(l) {
			out = append(out, l)
		}
	}
	return out
}

func rbacGet(ctx context.Context, hc *http.Client, url, token string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// rbacWithoutWorkloads drops the Deployments and PodDisruptionBudgets of a rendering: the test
// runs the binary itself, only the RBAC objects are applied.
func rbacWithoutWorkloads(t *testing.T, rendered []byte) ([]byte, []string) {
	t.Helper()
	var keep [][]byte
	var args []string
	for _, doc := range bytes.Split(rendered, []byte("\n---\n")) {
		var meta struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "Deployment":
			var d appsv1.Deployment
			if err := yaml.Unmarshal(doc, &d); err != nil {
				t.Fatal(err)
			}
			args = d.Spec.Template.Spec.Containers[0].Args
		case "PodDisruptionBudget", "":
		default:
			keep = append(keep, doc)
		}
	}
	return bytes.Join(keep, []byte("\n---\n")), args
}

// TestRBACDiskProvisioner runs azure-disk-provisioner with the chart's flags under a token of the
// chart's ServiceAccount: a claim of a StorageClass served by it is provisioned (a managed disk
// in azsim, a bound PersistentVolume) and, once deleted, its volume and disk are removed, with
// leader election on its Lease and no "forbidden" in its log.
func TestRBACDiskProvisioner(t *testing.T) {
	working(t)
	bin := nodesRequireBinary(t, "azure-disk-provisioner")
	if _, err := os.Stat(filepath.Join(framework.ToolsDir(), "helm")); err != nil {
		// deploy/manifests holds the default rendering only, where the provisioner is off.
		if framework.InCI() {
			t.Fatalf("helm missing (hack/verify-deploy.sh installs it): %v", err)
		}
		t.Skipf("helm missing (run hack/verify-deploy.sh): %v", err)
	}
	e := framework.Start(t, framework.Options{})
	ctx := context.Background()
	helm := filepath.Join(framework.ToolsDir(), "helm")
	out, err := exec.Command(helm, "template", "azure-ccm", filepath.Join(framework.RepoRoot(), "deploy", "chart", "azure-ccm"),
		"--namespace", rbacNamespace, "--kube-version", framework.PinnedVersions()["KUBERNETES_VERSION"],
		"--set", "diskProvisioner.enabled=true", "--show-only", "templates/disk-provisioner.yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	rbac, chartArgs := rbacWithoutWorkloads(t, out)
	if len(chartArgs) == 0 {
		t.Fatal("no provisioner Deployment in the rendering")
	}
	rbacApply(t, e, rbac)
	const sa = "azure-disk-provisioner"
	kubeconfig := rbacKubeconfig(t, e, sa, rbacToken(t, e, sa))

	// Zoned nodes, as the CCM would have labelled them: the disk's zone comes from them.
	for _, m := range e.Machines {
		labels := map[string]string{corev1.LabelTopologyRegion: m.Region}
		if m.Zone != "" {
			labels[corev1.LabelTopologyZone] = m.Region + "-" + m.Zone
		}
		nodesCreate(t, e, m, "", labels)
	}

	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, a := range chartArgs {
		if !strings.HasPrefix(a, "--cloud-config=") && !strings.HasPrefix(a, "--secure-port=") {
			args = append(args, a)
		}
	}
	if len(args) == len(chartArgs) {
		t.Fatalf("the chart's provisioner has no --secure-port: %v", chartArgs)
	}
	args = append(args, "--kubeconfig="+kubeconfig, "--cloud-config="+e.CloudConfigPath, "--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port), "--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig)
	logPath := filepath.Join(e.Dir, "logs", "disk-provisioner.log")
	p, err := framework.StartProcess(framework.ProcessSpec{Name: "disk-provisioner", Path: bin, Args: args,
		Env: []string{"SSL_CERT_FILE=" + e.Azure.CAFile}, LogPath: logPath})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Stop(10 * time.Second)
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("provisioner log:\n%s", b)
		}
	})

	e.WaitFor("provisioner lease held", func(ctx context.Context) (bool, error) {
		l, err := e.Kube.CoordinationV1().Leases(rbacNamespace).Get(ctx, "disk.azure-ccm.io", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", fmt.Errorf("no holder")
	}, time.Minute)

	// The secure port: /healthz open (and healthy once the informers synced), /metrics only to
	// authorised clients.
	base := fmt.Sprintf("https://127.0.0.1:%d", port)
	plain := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	e.WaitFor("provisioner /healthz ok", func(ctx context.Context) (bool, error) {
		code, body, err := rbacGet(ctx, plain, base+"/healthz?verbose", "")
		if err != nil {
			return false, err
		}
		return code == http.StatusOK && strings.Contains(body, "[+]informer-sync ok") && strings.Contains(body, "[+]leaderElection ok"),
			fmt.Errorf("HTTP %d %s", code, body)
	}, time.Minute)
	if code, _, err := rbacGet(ctx, plain, base+"/metrics", ""); err != nil || (code != http.StatusUnauthorized && code != http.StatusForbidden) {
		t.Errorf("anonymous /metrics of the provisioner: HTTP %d %v, want 401 or 403", code, err)
	}

	immediate := storagev1.VolumeBindingImmediate
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "rbac-disk"}, Provisioner: "disk.azure-ccm.io",
		Parameters: map[string]string{"skuname": "StandardSSD_LRS"}, VolumeBindingMode: &immediate}
	if _, err := e.Kube.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "rbac-claim", Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &sc.Name,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("4Gi")}},
		},
	}
	if _, err := e.Kube.CoreV1().PersistentVolumeClaims("default").Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pvName string
	e.WaitFor("claim bound to a provisioned volume", func(ctx context.Context) (bool, error) {
		c, err := e.Kube.CoreV1().PersistentVolumeClaims("default").Get(ctx, claim.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pvName = c.Spec.VolumeName
		return c.Status.Phase == corev1.ClaimBound, fmt.Errorf("claim %s, volume %q", c.Status.Phase, pvName)
	}, 2*time.Minute)
	disks, err := e.Azsim.List(ctx, "Microsoft.Compute/disks")
	if err != nil {
		t.Fatal(err)
	}
	if len(disks) != 1 {
		t.Fatalf("azsim has %d disks after provisioning, want 1", len(disks))
	}
	// Metrics of the provisioning, to an authorised client.
	adminTLS, err := rest.TLSConfigFor(e.RestConfig)
	if err != nil {
		t.Fatal(err)
	}
	adminTLS.RootCAs, adminTLS.InsecureSkipVerify = nil, true
	admin := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: adminTLS}}
	if code, body, err := rbacGet(ctx, admin, base+"/metrics", ""); err != nil || code != http.StatusOK ||
		!strings.Contains(body, "disk_provisioner_operations_total") || !strings.Contains(body, "azure_ccm_arm_requests_total") {
		t.Errorf("the cluster admin's /metrics of the provisioner: HTTP %d %v (provisioner metrics: %v)", code, err,
			strings.Contains(body, "disk_provisioner_operations_total"))
	}

	if err := e.Kube.CoreV1().PersistentVolumeClaims("default").Delete(ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	defer rbacCheckRoleCovers(t, e, "azure-disk-provisioner", 2)
	e.WaitFor("volume "+pvName+" and its disk deleted", func(ctx context.Context) (bool, error) {
		if _, err := e.Kube.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("volume still there (err=%v)", err)
		}
		d, err := e.Azsim.List(ctx, "Microsoft.Compute/disks")
		if err != nil {
			return false, err
		}
		return len(d) == 0, fmt.Errorf("%d disks left", len(d))
	}, 2*time.Minute)

	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if lines := rbacForbiddenLines(string(b)); len(lines) > 0 {
		t.Errorf("the provisioner was denied by RBAC (%d lines), e.g.:\n%s", len(lines), strings.Join(lines[:min(5, len(lines))], "\n"))
	}
}

// rbacCheckRoleCovers fails unless every role action azsim saw the program need (calls and the
// join actions of the resources its writes reference) is allowed by the program's custom role
// (deploy/azure). TestMain checks the converse over the whole suite.
func rbacCheckRoleCovers(t *testing.T, e *framework.Env, program string, minActions int) {
	t.Helper()
	ctx := context.Background()
	role, err := azure.RoleOf(program)
	if err != nil {
		t.Fatal(err)
	}
	stats, err := e.Azsim.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := stats.RoleActionsOf(program)
	for a := range seen {
		if !role.Allows(a) {
			t.Errorf("%s needed %s: its role %s lacks it", program, a, azure.ProgramRoles[program])
		}
	}
	if len(seen) < minActions {
		t.Errorf("only %d distinct role actions seen for %s (%v): azsim counted too little", len(seen), program, seen)
	}
	t.Logf("role actions %s needed: %v", program, seen)
}
