package framework

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Proc is one process found in /proc.
type Proc struct {
	PID     int
	Cmdline []string
}

// parseCmdline splits /proc/<pid>/cmdline (NUL-separated, NUL-terminated) into arguments.
func parseCmdline(raw []byte) []string {
	raw = bytes.TrimRight(raw, "\x00")
	if len(raw) == 0 {
		return nil
	}
	return strings.Split(string(raw), "\x00")
}

// mentions reports whether any argument contains marker.
func mentions(args []string, marker string) bool {
	if marker == "" {
		return false
	}
	for _, a := range args {
		if strings.Contains(a, marker) {
			return true
		}
	}
	return false
}

// ProcessesMentioning lists the live processes with marker in their command line. Every
// process of a test environment mentions the environment's unique work dir (a flag value or
// the binary path), so this finds them all, and only them.
func ProcessesMentioning(marker string) []Proc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []Proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue // exited meanwhile, or a kernel thread
		}
		args := parseCmdline(raw)
		if mentions(args, marker) && !isZombie(pid) {
			out = append(out, Proc{PID: pid, Cmdline: args})
		}
	}
	return out
}

// isZombie reports whether pid has exited but was not reaped yet (it holds no resources).
func isZombie(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name, which may itself contain spaces.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z'
}

// groupMembers lists the live (not zombie) processes of process group pgid.
func groupMembers(pgid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// After the command name: state, ppid, pgrp.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 3 || f[0] == "Z" {
			continue
		}
		if g, err := strconv.Atoi(f[2]); err == nil && g == pgid {
			out = append(out, pid)
		}
	}
	return out
}

func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	return !isZombie(pid)
}

// killGroupOrProcess sends SIGTERM to pid's process group (to pid alone when it leads none),
// waits up to grace for it to exit, then sends SIGKILL.
func killGroupOrProcess(pid int, grace time.Duration) error {
	target := pid
	if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid {
		target = -pid
	}
	if err := syscall.Kill(target, syscall.SIGTERM); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		return err
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !processAlive(pid) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := syscall.Kill(target, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}
