//go:build images

package images

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/azure-ccm/azure-ccm/test/framework"
)

// chartWorkload is the pod spec of the Deployment or DaemonSet `name` in deploy/manifests/file:
// the chart rendered with its defaults, which hack/verify-deploy.sh keeps equal to `helm
// template`.
func chartWorkload(t *testing.T, file, name string) corev1.PodSpec {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "deploy", "manifests", file))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range bytes.Split(b, []byte("\n---\n")) {
		var obj struct {
			Kind     string
			Metadata struct{ Name string }
			Spec     struct {
				Template struct{ Spec corev1.PodSpec }
			}
		}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if (obj.Kind == "Deployment" || obj.Kind == "DaemonSet") && obj.Metadata.Name == name {
			return obj.Spec.Template.Spec
		}
	}
	t.Fatalf("%s has no workload %s", file, name)
	return corev1.PodSpec{}
}

// podRun is how a pod of spec would run the image, as `podman run` arguments: the pod's
// network, the user of the pod (or container) security context, a read-only root without the
// tmpfs podman would add, the dropped capabilities, no privilege escalation, and each volume
// mount from the host directory volumes names for it. It ends with the image and the chart's
// command and arguments ($(VAR) expanded from env), to which the caller appends the flags a pod
// would not need outside a cluster.
func podRun(t *testing.T, spec corev1.PodSpec, ref string, volumes, env map[string]string) []string {
	t.Helper()
	if len(spec.Containers) != 1 {
		t.Fatalf("want one container, have %d", len(spec.Containers))
	}
	c := spec.Containers[0]
	args := []string{"run", "--rm", "--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"}
	if spec.HostNetwork {
		args = append(args, "--network=host")
	} else {
		args = append(args, "--network=none")
	}
	psc, csc := spec.SecurityContext, c.SecurityContext
	if psc == nil || csc == nil {
		t.Fatal("the chart sets no pod or container security context")
	}
	uid, gid := psc.RunAsUser, psc.RunAsGroup
	if csc.RunAsUser != nil {
		uid = csc.RunAsUser
	}
	if csc.RunAsGroup != nil {
		gid = csc.RunAsGroup
	}
	if uid == nil || gid == nil || *uid == 0 {
		t.Fatal("the chart does not run the container as a non-root uid and gid")
	}
	args = append(args, fmt.Sprintf("--user=%d:%d", *uid, *gid))
	if csc.ReadOnlyRootFilesystem != nil && *csc.ReadOnlyRootFilesystem {
		args = append(args, "--read-only", "--read-only-tmpfs=false")
	}
	if csc.Capabilities != nil {
		for _, cp := range csc.Capabilities.Drop {
			args = append(args, "--cap-drop="+string(cp))
		}
	}
	if csc.AllowPrivilegeEscalation != nil && !*csc.AllowPrivilegeEscalation {
		args = append(args, "--security-opt=no-new-privileges")
	}
	for _, m := range c.VolumeMounts {
		dir, ok := volumes[m.Name]
		if !ok {
			t.Fatalf("no host directory for volume %s", m.Name)
		}
		v := dir + ":" + m.MountPath
		if m.ReadOnly {
			v += ":ro"
		}
		args = append(args, "-v", v)
	}
	expand := map[string]string{}
	for _, e := range c.Env {
		v, ok := env[e.Name]
		if !ok && e.ValueFrom == nil {
			v, ok = e.Value, true
		}
		if !ok {
			t.Fatalf("no value for the chart's env %s", e.Name)
		}
		expand[e.Name] = v
		args = append(args, "-e", e.Name+"="+v)
	}
	entrypoint, err := json.Marshal(c.Command)
	if err != nil {
		t.Fatal(err)
	}
	args = append(args, "--entrypoint="+string(entrypoint), ref)
	for _, a := range c.Args {
		for k, v := range expand {
			a = strings.ReplaceAll(a, "$("+k+")", v)
		}
		args = append(args, a)
	}
	return args
}

// outOfCluster is what a pod gets from the cluster and a container on the host needs given: a
// directory (mounted at /kube) holding the kubeconfig with its certificates inlined and
// azsim's CA, both readable by the container's non-root user, and the cloud config directory
// (the chart's Secret volume).
type outOfCluster struct {
	kubeDir, cloudDir string
}

func newOutOfCluster(t *testing.T, e *framework.Env) outOfCluster {
	t.Helper()
	o := outOfCluster{kubeDir: t.TempDir(), cloudDir: t.TempDir()}
	for _, d := range []string{o.kubeDir, o.cloudDir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := clientcmd.LoadFromFile(e.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	// Inline the certificate files: the container sees none of the host's paths.
	if err := clientcmdapi.FlattenConfig(cfg); err != nil {
		t.Fatal(err)
	}
	kube, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(e.Azure.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	cloud, err := os.ReadFile(e.CloudConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	for path, b := range map[string][]byte{
		filepath.Join(o.kubeDir, "kubeconfig"):   kube,
		filepath.Join(o.kubeDir, "azsim-ca.pem"): ca,
		filepath.Join(o.cloudDir, "azure.json"):  cloud,
	} {
		if err := os.WriteFile(path, b, 0o644); err != nil { //nolint:gosec // G306: read by the container's non-root user
			t.Fatal(err)
		}
	}
	return o
}

// mounts adds the kube directory and azsim's CA (in place of the CA roots a real cloud would
// use) to a podRun.
func (o outOfCluster) mounts() []string {
	return []string{"-v", o.kubeDir + ":/kube:ro", "-e", "SSL_CERT_FILE=/kube/azsim-ca.pem"}
}

// kubeconfig flags stand in for the in-cluster configuration of the pod's service account.
func kubeconfigFlags(names ...string) []string {
	var out []string
	for _, n := range names {
		out = append(out, "--"+n+"=/kube/kubeconfig")
	}
	return out
}

// withOptions inserts opts right after "run" (they must come before the image).
func withOptions(run []string, opts ...string) []string {
	return append(append([]string{run[0]}, opts...), run[1:]...)
}

// TestChartImagesRunAgainstAzsim runs the node manager and CCM images as the chart runs them
// (its rendered arguments, user, read-only root, dropped capabilities, host network, the cloud
// config mounted where its Secret would be) against azsim and a kube-apiserver: the node
// manager initialises its node from azsim's IMDS, and the CCM initialises another node and
// gives a LoadBalancer service its IP.
func TestChartImagesRunAgainstAzsim(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	imgs := loadImages(ctx, t)
	e := framework.Start(t, framework.Options{})
	if len(e.Machines) < 2 {
		t.Fatalf("want two machines, azsim has %d", len(e.Machines))
	}
	o := newOutOfCluster(t, e)
	volumes := map[string]string{"cloud-config": o.cloudDir}

	t.Run("node manager initialises its node", func(t *testing.T) {
		m := e.Machines[0]
		e.CreateNodes(framework.NodeOptions{}, m)
		e.Azure.Server.IMDS().SetDefaultVM(m.NodeName)
		spec := chartWorkload(t, "node-manager-daemonset.yaml", "azure-cloud-node-manager")
		run := podRun(t, spec, imgs["azure-cloud-node-manager"].ref, volumes, map[string]string{"NODE_NAME": m.NodeName})
		run = withOptions(run, o.mounts()...)
		run = append(run, kubeconfigFlags("kubeconfig")...)
		run = append(run, "--imds-endpoint="+e.Azure.IMDSURL, "--once")
		t.Logf("podman %s", strings.Join(run, " "))
		out, err := podman(ctx, run...).CombinedOutput()
		if err != nil {
			t.Fatalf("node manager image: %v\n%s", err, out)
		}
		e.WaitFor("node manager initialised "+m.NodeName, nodeHasProviderID(e, m), 30*time.Second)
	})

	t.Run("CCM initialises a node and gives a LoadBalancer service its IP", func(t *testing.T) {
		m := e.Machines[1]
		e.CreateNodes(framework.NodeOptions{}, m)
		port := freePort(t)
		name := "ccm-image-test-" + strconv.Itoa(port)
		spec := chartWorkload(t, "ccm-deployment.yaml", "azure-cloud-controller-manager")
		run := podRun(t, spec, imgs["azure-cloud-controller-manager"].ref, volumes, nil)
		run = withOptions(run, append(o.mounts(), "-d", "--name", name)...)
		run = append(run, kubeconfigFlags("kubeconfig", "authentication-kubeconfig", "authorization-kubeconfig")...)
		// The chart's port is fixed; tests on this host may run other CCMs.
		run = append(run, "--secure-port="+strconv.Itoa(port))
		t.Logf("podman %s", strings.Join(run, " "))
		if out, err := podman(ctx, run...).CombinedOutput(); err != nil {
			t.Fatalf("CCM image: %v\n%s", err, out)
		}
		defer func() {
			if t.Failed() {
				logs, _ := podman(context.Background(), "logs", "--tail", "40", name).CombinedOutput()
				t.Logf("CCM container logs (last 40 lines):\n%s", logs)
			}
			if b, err := podman(context.Background(), "rm", "-f", "-t", "5", name).CombinedOutput(); err != nil {
				t.Logf("podman rm %s: %v %s", name, err, b)
			}
		}()
		e.WaitFor("CCM initialised "+m.NodeName, e.NodeInitialized(m.NodeName), 2*time.Minute)
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "image-test", Namespace: "default"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "image-test"},
				Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
		}
		if _, err := e.Kube.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.WaitFor("service image-test has an ingress IP", e.ServiceIngress("default", "image-test"), 3*time.Minute)
		s, err := e.Kube.CoreV1().Services("default").Get(ctx, "image-test", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("service image-test: ingress %v", s.Status.LoadBalancer.Ingress)
	})
}

// nodeHasProviderID holds once m's node has its provider ID and no uninitialized taint.
func nodeHasProviderID(e *framework.Env, m framework.Machine) framework.Condition {
	init := e.NodeInitialized(m.NodeName)
	return func(ctx context.Context) (bool, error) {
		if ok, err := init(ctx); !ok {
			return false, err
		}
		n, err := e.Kube.CoreV1().Nodes().Get(ctx, m.NodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if !strings.EqualFold(n.Spec.ProviderID, m.ProviderID) {
			return false, fmt.Errorf("%s providerID %q, want %q", m.NodeName, n.Spec.ProviderID, m.ProviderID)
		}
		return true, nil
	}
}
