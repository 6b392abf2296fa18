// Command demoenv keeps a demo environment running for hack/demo.sh: azsim, a kwokctl cluster,
// simulated nodes for the seeded VMs and the CCM, all from the test framework. It writes
// <state>/ready with the environment's facts once everything is up, then runs until SIGTERM
// or SIGINT and tears everything down.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/azure-ccm/azure-ccm/test/framework"
)

// readyFile is what hack/demo.sh sources and prints for the user: shell variable lines.
func readyFile(vars [][2]string) []byte {
	var b strings.Builder
	for _, v := range vars {
		fmt.Fprintf(&b, "%s=%q\n", v[0], v[1])
	}
	return []byte(b.String())
}

func main() {
	state := flag.String("state", "_output/demo", "state directory")
	flag.Parse()
	t := &daemonT{}
	defer t.runCleanups()

	env := framework.Start(t, framework.Options{Dir: filepath.Join(*state, "env")})
	var nodes []string
	for _, n := range env.CreateNodes(framework.NodeOptions{ProviderID: true}, env.Machines...) {
		nodes = append(nodes, n.Name)
	}
	// Until the CCM binary exists the demo still shows everything else.
	var ccmDone <-chan struct{}
	if _, err := os.Stat(env.CCMBinary()); err != nil {
		log.Printf("WARNING: no CCM binary at %s (%v): nodes stay uninitialized and services get no IP", env.CCMBinary(), err)
	} else {
		env.StartCCM()
		ccmDone = env.CCM().Done()
	}
	b := readyFile([][2]string{
		{"DEMO_KUBECONFIG", env.Kubeconfig},
		{"DEMO_CLOUD_CONFIG", env.CloudConfigPath},
		{"DEMO_AZSIM_URL", env.Azure.URL},
		{"DEMO_AZSIM_CA", env.Azure.CAFile},
		{"DEMO_CCM_LOG", env.CCMLogPath()},
		{"DEMO_CCM_PORT", strconv.Itoa(env.CCMPort())},
		{"DEMO_NODES", strings.Join(nodes, " ")},
		{"DEMO_CLUSTER_DIR", env.Cluster.Dir()},
		{"DEMO_CCM_RUNNING", strconv.FormatBool(ccmDone != nil)},
	})
	if err := os.WriteFile(filepath.Join(*state, "ready"), b, 0o644); err != nil {
		t.Fatalf("%v", err)
	}
	log.Printf("demo environment ready: %s", b)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case s := <-sig:
		log.Printf("%v: tearing down", s)
	case <-ccmDone:
		_, err := env.CCM().Exited()
		log.Printf("the CCM exited (%v); see %s; tearing down", err, env.CCMLogPath())
	}
}

// daemonT lets the framework, written for tests, run in a long-lived program.
type daemonT struct {
	mu       sync.Mutex
	cleanups []func()
	failed   bool
}

func (t *daemonT) Helper()                         {}
func (t *daemonT) Name() string                    { return "demo" }
func (t *daemonT) Logf(format string, args ...any) { log.Printf(format, args...) }
func (t *daemonT) Failed() bool                    { t.mu.Lock(); defer t.mu.Unlock(); return t.failed }
func (t *daemonT) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

func (t *daemonT) Fatalf(format string, args ...any) {
	t.mu.Lock()
	t.failed = true
	t.mu.Unlock()
	log.Printf("FATAL: "+format, args...)
	t.runCleanups()
	os.Exit(1)
}

func (t *daemonT) Skipf(format string, args ...any) { t.Fatalf("cannot run: "+format, args...) }

func (t *daemonT) Errorf(format string, args ...any) {
	t.mu.Lock()
	t.failed = true
	t.mu.Unlock()
	log.Printf("ERROR: "+format, args...)
}

// runCleanups runs the registered cleanups last-first, like testing does.
func (t *daemonT) runCleanups() {
	t.mu.Lock()
	fs := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
	fmt.Fprintln(os.Stderr, "demo environment torn down")
}
