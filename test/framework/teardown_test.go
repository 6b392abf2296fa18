package framework

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The kwokctl components of one environment: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok-controller.
const clusterProcesses = 5

// TestTeardownLeavesNothing brings an environment up and down twice and checks that no process,
// and no temp dir, of either run survives its test.
func TestTeardownLeavesNothing(t *testing.T) {
	RequireTools(t)
	for i := range 2 {
		var dir string
		t.Run("run", func(t *testing.T) {
			env := Start(t, Options{NoAzure: true})
			dir = env.Dir
			if n := len(ProcessesMentioning(dir)); n < clusterProcesses {
				t.Fatalf("run %d: %d processes mention %s while the cluster runs, want >= %d", i, n, dir, clusterProcesses)
			}
		})
		if dir == "" {
			t.Fatalf("run %d did not start", i)
		}
		if procs := ProcessesMentioning(dir); len(procs) > 0 {
			t.Errorf("run %d leaked %d processes: %v", i, len(procs), procs)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("run %d leaked its dir %s (stat: %v)", i, dir, err)
		}
	}
}

// TestReaperCleansUpAfterKill kills a test process that has an environment up (SIGKILL: no
// cleanup code can run) and waits for the reaper to remove every trace of it.
func TestReaperCleansUpAfterKill(t *testing.T) {
	RequireTools(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldEnvironment$", "-test.v")
	cmd.Env = append(os.Environ(), "AZURE_CCM_FRAMEWORK_HELPER=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	dirCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "ENV_DIR="); ok {
				dirCh <- d
			}
		}
		close(dirCh)
	}()
	var dir string
	select {
	case d, ok := <-dirCh:
		if !ok {
			t.Fatal("helper exited before its environment was up")
		}
		dir = d
	case <-time.After(4 * time.Minute):
		t.Fatal("helper did not bring its environment up in time")
	}
	if n := len(ProcessesMentioning(dir)); n < clusterProcesses {
		t.Fatalf("%d processes mention %s, want >= %d", n, dir, clusterProcesses)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err = poll(ctx, 200*time.Millisecond, func(context.Context) (bool, error) {
		if procs := ProcessesMentioning(dir); len(procs) > 0 {
			return false, &leak{procs: procs}
		}
		_, err := os.Stat(dir)
		return os.IsNotExist(err), err
	})
	if err != nil {
		t.Fatalf("the reaper did not clean up after the killed test: %v", err)
	}
}

type leak struct{ procs []Proc }

func (l *leak) Error() string {
	var b strings.Builder
	for _, p := range l.procs {
		b.WriteString(strings.Join(p.Cmdline, " ") + "; ")
	}
	return "processes left: " + b.String()
}

// TestHelperHoldEnvironment is not a test: TestReaperCleansUpAfterKill runs it in a child
// process that it then kills.
func TestHelperHoldEnvironment(t *testing.T) {
	if os.Getenv("AZURE_CCM_FRAMEWORK_HELPER") != "1" {
		t.Skip("helper process for TestReaperCleansUpAfterKill")
	}
	env := Start(t, Options{NoAzure: true})
	_, _ = os.Stdout.WriteString("ENV_DIR=" + env.Dir + "\n")
	select {} // held until killed
}
