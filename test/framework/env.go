package framework

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/azure-ccm/azure-ccm/internal/azsim/client"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
)

// Options configure Start.
type Options struct {
	// KubeVersion is passed to kwokctl; defaults to KUBERNETES_VERSION of hack/versions.env.
	KubeVersion string
	// ClusterExtraArgs are extra component flags, each "component=flag=value"
	// (e.g. "kube-apiserver=v=4").
	ClusterExtraArgs []string
	// StartupTimeout bounds the cluster bring-up; default 3 minutes.
	StartupTimeout time.Duration
	// CCMBinary is the CCM to test; default _output/bin/azure-cloud-controller-manager.
	CCMBinary string
	// CloudConfig overrides keys of the generated azure.json; a nil value removes the key.
	CloudConfig map[string]any
	// NoAzure runs the cluster without azsim (tests of the framework itself).
	NoAzure bool
	// Topology is seeded into azsim; default DefaultTopology().
	Topology *topology.Topology
	// Dir is used instead of a new temp dir (the demo keeps its state in the work tree). It
	// must not exist yet; teardown removes it.
	Dir string
}

// Env is one test environment: a kwokctl cluster, azsim and (once started) the CCM.
type Env struct {
	T    T
	Opts Options
	// Name is unique per environment; every process of the environment mentions Dir.
	Name string
	// Dir is the environment's temp dir: kwok work dir, kubeconfig, azure.json, logs.
	Dir        string
	Tools      Tools
	Cluster    *Cluster
	Kubeconfig string
	RestConfig *rest.Config
	Kube       kubernetes.Interface
	// Azure is azsim and the identity the CCM uses against it (nil with NoAzure).
	Azure *Azure
	// Azsim is azsim's control client (nil with NoAzure).
	Azsim *client.Client
	// Machines are the VMs seeded into azsim, ready for CreateNodes.
	Machines []Machine
	// CloudConfigPath is the azure.json given to the CCM.
	CloudConfigPath string

	mu      sync.Mutex
	ccm     *Process
	ccmArgs []string
	ccmEnv  []string
	ccmPort int

	reaper       *reaper
	unregister   func()
	teardownOnce sync.Once
}

// Start brings up an environment and registers its teardown with t.Cleanup. It skips the test
// when the cluster tools are missing outside CI.
func Start(t T, opts Options) *Env {
	t.Helper()
	tools := RequireTools(t)
	e, err := start(t, tools, opts)
	if err != nil {
		t.Fatalf("framework: %v", err)
	}
	return e
}

func start(t T, tools Tools, opts Options) (*Env, error) {
	name := "azccm-" + randomHex(4)
	dir, err := makeEnvDir(opts.Dir, name)
	if err != nil {
		return nil, err
	}
	e := &Env{T: t, Opts: opts, Name: name, Dir: dir, Tools: tools}
	e.Kubeconfig = filepath.Join(dir, "kubeconfig")
	for _, sub := range []string{"pids", "logs", "kwok"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	// From here on every exit path goes through teardown.
	e.reaper, err = startReaper(dir, name, filepath.Join(dir, "kwok"), e.Kubeconfig, tools.Kwokctl)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	e.unregister = onInterrupt(e.teardown)
	t.Cleanup(e.teardown)

	timeout := opts.StartupTimeout
	if timeout <= 0 {
		timeout = 3 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	if !opts.NoAzure {
		topo := opts.Topology
		if topo == nil {
			topo = DefaultTopology()
		}
		var res *topology.Result
		if e.Azure, res, err = startAzure(ctx, dir, topo, t.Logf); err != nil {
			return nil, fmt.Errorf("start azsim: %w", err)
		}
		e.Azsim, e.Machines = e.Azure.Control, res.Machines
	}
	kubeVersion := opts.KubeVersion
	if kubeVersion == "" {
		kubeVersion = PinnedVersions()["KUBERNETES_VERSION"]
	}
	began := time.Now()
	e.Cluster, err = CreateCluster(ctx, ClusterOptions{
		Name:        name,
		WorkDir:     filepath.Join(dir, "kwok"),
		Kubeconfig:  e.Kubeconfig,
		Tools:       tools,
		KubeVersion: kubeVersion,
		ExtraArgs:   opts.ClusterExtraArgs,
		Wait:        timeout,
	})
	if err != nil {
		return nil, err
	}
	t.Logf("framework: cluster %s up in %s (dir %s)", name, time.Since(began).Round(time.Millisecond), dir)

	if e.RestConfig, err = clientcmd.BuildConfigFromFlags("", e.Kubeconfig); err != nil {
		return nil, err
	}
	e.RestConfig.QPS, e.RestConfig.Burst = 200, 400
	if e.Kube, err = kubernetes.NewForConfig(e.RestConfig); err != nil {
		return nil, err
	}
	if err := e.waitAPIReady(ctx); err != nil {
		return nil, err
	}
	if e.Azure != nil {
		if err := e.WriteCloudConfig(opts.CloudConfig); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// waitAPIReady waits until the apiserver is ready and the default namespace exists.
func (e *Env) waitAPIReady(ctx context.Context) error {
	return poll(ctx, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		body, err := e.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return false, fmt.Errorf("readyz: %w (%s)", err, body)
		}
		_, err = e.Kube.CoreV1().Namespaces().Get(ctx, "default", metaGet)
		return err == nil, err
	})
}

// teardown stops everything the environment started. It is idempotent and runs from
// t.Cleanup or from the interrupt handler.
func (e *Env) teardown() {
	e.teardownOnce.Do(func() {
		if e.unregister != nil {
			e.unregister()
		}
		if err := e.StopCCM(); err != nil {
			e.T.Logf("framework: %v", err)
		}
		unknown, known := RaceReports(filepath.Join(e.Dir, "logs"), KnownUpstreamRaces())
		for _, r := range known {
			e.T.Logf("framework: the race detector reported a known race of a dependency, which does not fail the test: %s", r)
		}
		for _, r := range unknown {
			e.T.Errorf("framework: the race detector reported a data race in %s", r)
		}
		if e.T.Failed() {
			e.collectArtifacts()
		}
		e.recordRoleActions()
		if e.Azure != nil {
			e.Azure.Close()
		}
		if e.Cluster != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if err := e.Cluster.Delete(ctx); err != nil {
				e.T.Logf("framework: delete cluster: %v", err)
			}
			cancel()
		}
		// Anything still mentioning the work dir is ours and must not outlive the test.
		for _, p := range ProcessesMentioning(e.Dir) {
			e.T.Logf("framework: killing leftover process %d %v", p.PID, p.Cmdline)
			_ = killGroupOrProcess(p.PID, 2*time.Second)
		}
		if err := os.RemoveAll(e.Dir); err != nil {
			e.T.Logf("framework: remove %s: %v", e.Dir, err)
		}
		if e.reaper != nil {
			e.reaper.disarm()
		}
	})
}

// ArtifactsDir is where logs of a failed test go: $AZURE_CCM_ARTIFACTS/<test>, by default
// _output/test-artifacts/<test> in the work tree.
func (e *Env) ArtifactsDir() string {
	root := os.Getenv("AZURE_CCM_ARTIFACTS")
	if root == "" {
		root = filepath.Join(RepoRoot(), "_output", "test-artifacts")
	}
	return filepath.Join(root, sanitizeName(e.T.Name())+"-"+e.Name)
}

func (e *Env) collectArtifacts() {
	dst := e.ArtifactsDir()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		e.T.Logf("framework: artifacts: %v", err)
		return
	}
	logs, _ := filepath.Glob(filepath.Join(e.Dir, "logs", "*"))
	for _, f := range logs {
		if b, err := os.ReadFile(f); err == nil {
			_ = os.WriteFile(filepath.Join(dst, filepath.Base(f)), b, 0o644)
		}
	}
	if e.Cluster != nil {
		_ = e.Cluster.CopyLogs(filepath.Join(dst, "cluster"))
	}
	e.T.Logf("framework: logs of the failed test are in %s", dst)
}

// makeEnvDir creates the environment's dir: want if given (it must not exist), else a temp dir.
func makeEnvDir(want, name string) (string, error) {
	if want == "" {
		return os.MkdirTemp("", name+"-")
	}
	abs, err := filepath.Abs(want)
	if err != nil {
		return "", err
	}
	if err := os.Mkdir(abs, 0o755); err != nil {
		return "", fmt.Errorf("environment dir: %w", err)
	}
	return abs, nil
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func sanitizeName(s string) string { return unsafeChars.ReplaceAllString(s, "_") }

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// CreateNodes registers a node per machine, as kubelets with --cloud-provider=external do.
func (e *Env) CreateNodes(o NodeOptions, machines ...Machine) []*corev1.Node {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodes, err := CreateNodes(ctx, e.Kube, o, machines...)
	if err != nil {
		e.T.Fatalf("framework: %v", err)
	}
	return nodes
}

// Close tears the environment down now (as at the end of the test) to free the machine for
// the next one; the test's cleanup then does nothing more.
func (e *Env) Close() { e.teardown() }
