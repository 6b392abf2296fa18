package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// CCMBinaryName is the binary `make build` produces for the CCM.
const CCMBinaryName = "azure-cloud-controller-manager"

// ccmArgs are the flags every CCM run gets, before the test's own (pflag keeps the last value
// of a repeated flag, so tests can override any of these; StartCCM drops a default whose flag
// the test gives, see withoutOverridden). Routes and CIDR allocation are
// off because kwok nodes have no pod CIDRs; leader election is off because there is one
// replica per test.
func ccmArgs(kubeconfig, cloudConfig string, port int) []string {
	return []string{
		"--cloud-provider=azure",
		"--cloud-config=" + cloudConfig,
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--leader-elect=false",
		"--configure-cloud-routes=false",
		"--allocate-node-cidrs=false",
		"--v=2",
	}
}

// withoutOverridden drops the defaults whose flag name appears in args: pflag appends the
// values of a repeated slice flag (--authorization-always-allow-paths) instead of replacing
// them, so a test could not narrow such a default otherwise.
func withoutOverridden(defaults, args []string) []string {
	name := func(a string) string {
		n, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		return n
	}
	given := map[string]bool{}
	for _, a := range args {
		given[name(a)] = true
	}
	var out []string
	for _, d := range defaults {
		if !given[name(d)] {
			out = append(out, d)
		}
	}
	return out
}

// ccmEnv makes the CCM trust azsim's CA and nothing else changes.
func ccmEnv(caFile string) []string {
	if caFile == "" {
		return nil
	}
	return []string{"SSL_CERT_FILE=" + caFile}
}

// CCMBinary is the CCM the environment runs.
func (e *Env) CCMBinary() string {
	if e.Opts.CCMBinary != "" {
		return e.Opts.CCMBinary
	}
	return filepath.Join(BinDir(), CCMBinaryName)
}

// CCMLogPath is the CCM's combined output, kept across restarts.
func (e *Env) CCMLogPath() string { return filepath.Join(e.Dir, "logs", "ccm.log") }

// CCMPort is the CCM's secure port (/healthz, /metrics), fixed for the environment's life.
func (e *Env) CCMPort() int { return e.ccmPort }

// StartCCM starts the CCM with the default flags plus args and fails the test if it cannot.
func (e *Env) StartCCM(args ...string) {
	e.T.Helper()
	if err := e.startCCM(args); err != nil {
		e.T.Fatalf("framework: %v", err)
	}
}

func (e *Env) startCCM(args []string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ccm != nil {
		return fmt.Errorf("the CCM is already running (pid %d)", e.ccm.PID())
	}
	bin := e.CCMBinary()
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("CCM binary %s: %w (run `make build`)", bin, err)
	}
	if e.CloudConfigPath == "" {
		return fmt.Errorf("no azure.json: the environment runs without azsim")
	}
	if e.ccmPort == 0 {
		port, err := FreePort()
		if err != nil {
			return err
		}
		e.ccmPort = port
	}
	caFile := ""
	if e.Azure != nil {
		caFile = e.Azure.CAFile
	}
	p, err := StartProcess(ProcessSpec{
		Name:    "ccm",
		Path:    bin,
		Args:    append(withoutOverridden(ccmArgs(e.Kubeconfig, e.CloudConfigPath, e.ccmPort), args), args...),
		Env:     append(ccmEnv(caFile), e.ccmEnv...),
		LogPath: e.CCMLogPath(),
	})
	if err != nil {
		return err
	}
	// The reaper kills the CCM's group from this file if the test process dies.
	_ = os.WriteFile(filepath.Join(e.Dir, "pids", "ccm.pid"), []byte(strconv.Itoa(p.PID())), 0o644)
	e.ccm, e.ccmArgs = p, args
	return nil
}

// StopCCM stops the CCM. It reports an error if the CCM had exited by itself before.
func (e *Env) StopCCM() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ccm == nil {
		return nil
	}
	err := e.ccm.Stop(10 * time.Second)
	e.ccm = nil
	_ = os.Remove(filepath.Join(e.Dir, "pids", "ccm.pid"))
	return err
}

// SetCCMEnv sets environment variables ("NAME=value") for the CCM's next starts (e.g. a
// managed-identity endpoint).
func (e *Env) SetCCMEnv(env ...string) {
	e.mu.Lock()
	e.ccmEnv = append([]string(nil), env...)
	e.mu.Unlock()
}

// RestartCCM stops the CCM and starts it again with the same flags.
func (e *Env) RestartCCM() {
	e.T.Helper()
	e.mu.Lock()
	args := e.ccmArgs
	e.mu.Unlock()
	if err := e.StopCCM(); err != nil {
		e.T.Fatalf("framework: %v", err)
	}
	e.StartCCM(args...)
}

// CCM is the running CCM process, or nil.
func (e *Env) CCM() *Process {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ccm
}
