package framework

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// ProcessSpec describes a subprocess the framework owns.
type ProcessSpec struct {
	Name string
	Path string
	Args []string
	// Env is added to the test process's environment.
	Env []string
	// LogPath receives stdout and stderr, appended across restarts.
	LogPath string
}

// Process is a running subprocess in its own process group, so that stopping it also stops
// anything it started.
type Process struct {
	Spec ProcessSpec
	cmd  *exec.Cmd
	done chan struct{}

	mu  sync.Mutex
	err error
}

// StartProcess starts spec. The caller must Stop it.
func StartProcess(spec ProcessSpec) (*Process, error) {
	logf, err := os.OpenFile(spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log of %s: %w", spec.Name, err)
	}
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", spec.Name, err)
	}
	p := &Process{Spec: spec, cmd: cmd, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		logf.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// PID is the process id (also its process group id).
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the process ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.err
	default:
		return false, nil
	}
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Stop sends SIGTERM to the process group, then SIGKILL after grace, and waits for the exit.
// A process that was terminated by Stop is not an error.
func (p *Process) Stop(grace time.Duration) error {
	if exited, err := p.Exited(); exited {
		return unexpectedExit(p.Spec.Name, err)
	}
	pgid := p.PID()
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	// Children that ignored SIGTERM and outlived the leader. A signal is delivered
	// asynchronously, so wait until the group is really gone: callers check right after Stop
	// that nothing of the process is left, and on a loaded machine a killed child can take a
	// while to be scheduled and exit.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	deadline := time.Now().Add(grace)
	for len(groupMembers(pgid)) > 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: processes %v of its group still alive %s after SIGKILL", p.Spec.Name, groupMembers(pgid), grace)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// unexpectedExit turns the exit of a process nobody stopped into an error.
func unexpectedExit(name string, err error) error {
	if err == nil {
		return fmt.Errorf("%s exited on its own with status 0", name)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return fmt.Errorf("%s exited on its own: %s", name, ee.ProcessState)
	}
	return fmt.Errorf("%s: %w", name, err)
}
