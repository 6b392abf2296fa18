package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// CloudControllers are the cloud loops older kube-controller-managers ran (service LB, routes,
// cloud node lifecycle). The CCM under test must be their only owner. kube-controller-manager
// v1.37 no longer has them (its --controllers list names none; TestKCMHasNoCloudLoops checks
// the built binary), so the cluster runs it with --cloud-provider=external and without a
// --controllers override, which would be rejected for unknown names.
var CloudControllers = []string{
	"service-lb-controller",
	"node-route-controller",
	"cloud-node-lifecycle-controller",
}

// ClusterOptions shape one kwokctl cluster.
type ClusterOptions struct {
	// Name is the kwokctl cluster name; unique per run so processes can be told apart.
	Name string
	// WorkDir is KWOK_WORKDIR: kwokctl keeps its config, pids, logs and pki under it.
	WorkDir string
	// Kubeconfig is where kwokctl writes the admin kubeconfig (never ~/.kube/config).
	Kubeconfig  string
	Tools       Tools
	KubeVersion string
	// ExtraArgs are added to the defaults, each "component=flag=value".
	ExtraArgs []string
	// Wait bounds kwokctl's own wait for the cluster to be ready.
	Wait time.Duration
	// Ports are the components' ports; CreateCluster asks the kernel for any left zero.
	Ports ClusterPorts
}

// ClusterPorts are every port a binary-runtime cluster listens on. kwokctl would pick them by
// counting down from 32767 and probing, which races when clusters start in parallel (two
// packages' tests), so the framework takes kernel-assigned ephemeral ports instead.
type ClusterPorts struct {
	Etcd, EtcdPeer, KubeAPIServer, KubeControllerManager, KubeScheduler, KwokController int
}

func (p *ClusterPorts) all() []*int {
	return []*int{&p.Etcd, &p.EtcdPeer, &p.KubeAPIServer, &p.KubeControllerManager, &p.KubeScheduler, &p.KwokController}
}

// kwokctlConfig is a KwokctlConfiguration document fixing the ports (the etcd peer port has
// no command-line flag).
func kwokctlConfig(p ClusterPorts) string {
	return fmt.Sprintf(`apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  etcdPort: %d
  etcdPeerPort: %d
  kubeApiserverPort: %d
  kubeControllerManagerPort: %d
  kubeSchedulerPort: %d
  kwokControllerPort: %d
`, p.Etcd, p.EtcdPeer, p.KubeAPIServer, p.KubeControllerManager, p.KubeScheduler, p.KwokController)
}

// configPath is the kwokctl configuration file of the cluster.
func (o ClusterOptions) configPath() string {
	return filepath.Join(o.WorkDir, "kwokctl-"+o.Name+".yaml")
}

// createClusterArgs is the kwokctl command line for o: the binary runtime with every binary
// given explicitly, so kwokctl never tries to download anything.
func createClusterArgs(o ClusterOptions) []string {
	wait := o.Wait
	if wait <= 0 {
		wait = 2 * time.Minute
	}
	args := []string{
		"create", "cluster",
		"--config=" + o.configPath(),
		"--name=" + o.Name,
		"--runtime=binary",
		"--kubeconfig=" + o.Kubeconfig,
		"--etcd-binary=" + o.Tools.Etcd,
		"--kube-apiserver-binary=" + o.Tools.KubeAPIServer,
		"--kube-controller-manager-binary=" + o.Tools.KubeControllerManager,
		"--kube-scheduler-binary=" + o.Tools.KubeScheduler,
		"--kwok-controller-binary=" + o.Tools.Kwok,
		"--quiet-pull",
		"--wait=" + wait.String(),
	}
	args = append(args, "--extra-args=kube-controller-manager=cloud-provider=external")
	// The etcd the tests run (Debian's 3.4) cannot answer progress requests, so the apiserver
	// refuses every streaming list. With its WatchList gate on, it also turns a plain watch
	// from resourceVersion 0 into one, and kwok-controller watches that way: its pod watch
	// would fail at once on every attempt, and kwok would see pods only when its reflector
	// re-lists, after a back-off growing to 30 s (and up to twice that with jitter), so that
	// pods became Running a minute late. Switched off, those watches are plain watches again;
	// clients that ask for a streaming list explicitly fall back to LIST as they do against
	// any apiserver without it.
	args = append(args, "--extra-args=kube-apiserver=feature-gates=WatchList=false")
	// kwokctl's binary runtime has kwok play the kubelet of every node. Only the nodes carrying
	// its annotation (NewNode sets it): a test takes a node away from kwok by removing it, so
	// that a NotReady it sets stays (kwok would report any node it plays Ready again).
	args = append(args, "--extra-args=kwok-controller=manage-all-nodes=false",
		"--extra-args=kwok-controller=manage-nodes-with-annotation-selector="+KwokNodeAnnotation+"=fake")
	for _, a := range o.ExtraArgs {
		args = append(args, "--extra-args="+a)
	}
	return args
}

// Cluster is a running kwokctl cluster.
type Cluster struct {
	ClusterOptions
}

// kwokctlEnv isolates kwokctl in WorkDir: its config, cache and clusters stay in the temp dir.
// kwokctl has no version flag; KWOK_KUBE_VERSION picks the component flags it generates.
func (c *Cluster) kwokctlEnv() []string {
	env := append(os.Environ(), "KWOK_WORKDIR="+c.WorkDir)
	if c.KubeVersion != "" {
		env = append(env, "KWOK_KUBE_VERSION="+c.KubeVersion)
	}
	return env
}

func (c *Cluster) kwokctl(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, c.Tools.Kwokctl, args...)
	cmd.Env = c.kwokctlEnv()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.Bytes(), fmt.Errorf("kwokctl %s: %w\n%s", strings.Join(args[:min(2, len(args))], " "), err, out.String())
	}
	return out.Bytes(), nil
}

// CreateCluster runs `kwokctl create cluster`. On error the half-created cluster is deleted.
func CreateCluster(ctx context.Context, o ClusterOptions) (*Cluster, error) {
	if err := allocatePorts(&o.Ports); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.WorkDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(o.configPath(), []byte(kwokctlConfig(o.Ports)), 0o644); err != nil {
		return nil, err
	}
	c := &Cluster{ClusterOptions: o}
	if _, err := c.kwokctl(ctx, createClusterArgs(o)...); err != nil {
		// The components' logs go with the cluster: keep what they said of the failure.
		err = fmt.Errorf("%w%s", err, c.logTails(logTailLines))
		delCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c.Delete(delCtx)
		return nil, err
	}
	return c, nil
}

// logTailLines is how much of each component's log a failed creation reports.
const logTailLines = 15

// logTails returns the last n lines of every component log, each under its file's name.
func (c *Cluster) logTails(n int) string {
	files, _ := filepath.Glob(filepath.Join(c.Dir(), "logs", "*.log"))
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		fmt.Fprintf(&b, "\n--- %s (last %d lines)\n%s", filepath.Base(f), min(n, len(lines)), strings.Join(lines[max(0, len(lines)-n):], "\n"))
	}
	return b.String()
}

// allocatePorts fills the zero ports with distinct free ones.
func allocatePorts(p *ClusterPorts) error {
	var zero []*int
	for _, port := range p.all() {
		if *port == 0 {
			zero = append(zero, port)
		}
	}
	free, err := FreePorts(len(zero))
	if err != nil {
		return err
	}
	for i, port := range zero {
		*port = free[i]
	}
	return nil
}

// Dir is kwokctl's directory for this cluster (pids, logs, pki, bin).
func (c *Cluster) Dir() string { return filepath.Join(c.WorkDir, "clusters", c.Name) }

// Delete stops every component with `kwokctl delete cluster`, then kills whatever a pid file
// still names, so that a failed delete cannot leak processes.
func (c *Cluster) Delete(ctx context.Context) error {
	_, err := c.kwokctl(ctx, "delete", "cluster", "--name="+c.Name, "--kubeconfig="+c.Kubeconfig)
	for _, pid := range c.componentPIDs() {
		if processAlive(pid) {
			_ = killGroupOrProcess(pid, 5*time.Second)
		}
	}
	return err
}

// componentPIDs reads kwokctl's pid files. Each component runs in its own session.
func (c *Cluster) componentPIDs() []int {
	files, _ := filepath.Glob(filepath.Join(c.Dir(), "pids", "*.pid"))
	var pids []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// CopyLogs copies the component logs into dir (used when a test fails).
func (c *Cluster) CopyLogs(dir string) error {
	files, _ := filepath.Glob(filepath.Join(c.Dir(), "logs", "*.log"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
