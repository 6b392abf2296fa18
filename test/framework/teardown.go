package framework

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// Teardown has two safety nets besides t.Cleanup:
//   - SIGINT/SIGTERM: every live environment is torn down before the test binary exits;
//   - the reaper: a detached shell that waits on a pipe from the test process. If the test
//     process dies without saying "done" (SIGKILL, `go test -timeout` panic, a crash), the
//     pipe closes and the reaper kills the environment's processes and removes its work dir.

var interrupts struct {
	once sync.Once
	mu   sync.Mutex
	next int
	fns  map[int]func()
}

// onInterrupt registers fn to run if the test binary gets SIGINT or SIGTERM; the returned
// func unregisters it.
func onInterrupt(fn func()) (unregister func()) {
	interrupts.once.Do(func() {
		interrupts.fns = map[int]func(){}
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
		go func() {
			sig := <-ch
			fmt.Fprintf(os.Stderr, "framework: %v: tearing down test environments\n", sig)
			interrupts.mu.Lock()
			fns := make([]func(), 0, len(interrupts.fns))
			for _, f := range interrupts.fns {
				fns = append(fns, f)
			}
			interrupts.mu.Unlock()
			var wg sync.WaitGroup
			for _, f := range fns {
				wg.Add(1)
				go func() { defer wg.Done(); f() }()
			}
			wg.Wait()
			os.Exit(130)
		}()
	})
	interrupts.mu.Lock()
	defer interrupts.mu.Unlock()
	id := interrupts.next
	interrupts.next++
	interrupts.fns[id] = fn
	return func() {
		interrupts.mu.Lock()
		defer interrupts.mu.Unlock()
		delete(interrupts.fns, id)
	}
}

// reaperScript runs detached from the test process. It ignores the terminal's signals so a
// Ctrl-C that kills `go test` cannot kill it before it has cleaned up.
const reaperScript = `
trap '' INT TERM HUP
if IFS= read -r line && [ "$line" = done ]; then exit 0; fi
for f in "$REAP_DIR"/pids/*.pid "$KWOK_WORKDIR/clusters/$REAP_NAME/pids/"*.pid; do
  [ -f "$f" ] || continue
  pid=$(cat "$f")
  kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
done
"$REAP_KWOKCTL" delete cluster --name "$REAP_NAME" --kubeconfig "$REAP_KUBECONFIG" >/dev/null 2>&1 || true
rm -rf "$REAP_DIR"
`

// reaper is the handle on the watchdog shell.
type reaper struct {
	cmd *exec.Cmd
	w   io.WriteCloser
}

// startReaper arms the watchdog for the environment in dir. Framework-owned processes write
// their pid to dir/pids/<name>.pid so the reaper can find them.
func startReaper(dir, clusterName, workDir, kubeconfig, kwokctl string) (*reaper, error) {
	cmd := exec.Command("bash", "-c", reaperScript)
	cmd.Env = append(os.Environ(),
		"REAP_DIR="+dir,
		"REAP_NAME="+clusterName,
		"REAP_KUBECONFIG="+kubeconfig,
		"REAP_KWOKCTL="+kwokctl,
		"KWOK_WORKDIR="+workDir,
	)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start reaper: %w", err)
	}
	return &reaper{cmd: cmd, w: w}, nil
}

// disarm tells the reaper that the environment was torn down normally.
func (r *reaper) disarm() {
	_, _ = io.WriteString(r.w, "done\n")
	_ = r.w.Close()
	done := make(chan struct{})
	go func() { _ = r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
	}
}
