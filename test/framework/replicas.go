package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// CCMReplica is one more CCM process next to (or instead of) the environment's own, for
// high-availability tests: each replica has its own secure port, log and pid file, and is
// stopped when the test ends.
type CCMReplica struct {
	Name    string
	Port    int
	LogPath string
	*Process
}

// StartCCMReplica starts a CCM named name with the default flags plus args (which should
// include --leader-elect=true: the defaults turn leader election off).
func (e *Env) StartCCMReplica(name string, args ...string) *CCMReplica {
	e.T.Helper()
	if e.CloudConfigPath == "" {
		e.T.Fatalf("framework: no azure.json: the environment runs without azsim")
	}
	port, err := FreePort()
	if err != nil {
		e.T.Fatalf("framework: %v", err)
	}
	caFile := ""
	if e.Azure != nil {
		caFile = e.Azure.CAFile
	}
	r := &CCMReplica{Name: name, Port: port, LogPath: filepath.Join(e.Dir, "logs", "ccm-"+name+".log")}
	p, err := StartProcess(ProcessSpec{
		Name:    "ccm-" + name,
		Path:    e.CCMBinary(),
		Args:    append(ccmArgs(e.Kubeconfig, e.CloudConfigPath, port), args...),
		Env:     ccmEnv(caFile),
		LogPath: r.LogPath,
	})
	if err != nil {
		e.T.Fatalf("framework: start CCM replica %s: %v", name, err)
	}
	r.Process = p
	pidFile := filepath.Join(e.Dir, "pids", "ccm-"+name+".pid")
	_ = os.WriteFile(pidFile, []byte(strconv.Itoa(p.PID())), 0o644)
	e.T.Cleanup(func() {
		// A replica the test killed on purpose has exited already; nothing to report.
		if exited, _ := p.Exited(); !exited {
			_ = p.Stop(10 * time.Second)
		}
		_ = os.Remove(pidFile)
	})
	return r
}

// Log returns the replica's output so far.
func (r *CCMReplica) Log() string {
	b, err := os.ReadFile(r.LogPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return string(b)
}
