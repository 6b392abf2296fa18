package framework

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Ports for cluster components are picked below the kernel's ephemeral range. A port the kernel
// hands out for ":0" comes from the same range as the source ports of outgoing connections, so
// between choosing it and the component binding it, any process's new connection (kube-apiserver
// to etcd, a kubelet to the apiserver, another test package's cluster) can take it and the
// component then fails to start. Below the range only an explicit bind takes a port, and every
// test process reserves its ports with a lock file, so concurrent test packages never share one.

// portLockDir holds one lock file per reserved port, shared by all test processes on the machine.
func portLockDir() string { return filepath.Join(os.TempDir(), "azure-ccm-ports") }

// portRange is where ports are chosen: from 10000 up to the start of the ephemeral range.
func portRange() (lo, hi int) {
	lo, hi = 10000, 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	f := strings.Fields(string(b))
	if len(f) == 2 {
		if start, err := strconv.Atoi(f[0]); err == nil && start > lo+1000 {
			hi = start
		}
	}
	return lo, hi
}

// FreePort returns a free TCP port reserved for this process.
func FreePort() (int, error) {
	p, err := FreePorts(1)
	if err != nil {
		return 0, err
	}
	return p[0], nil
}

// FreePorts returns n distinct TCP ports that are free on all interfaces (cluster components
// listen on 0.0.0.0), outside the ephemeral range, and reserved for this process until it exits.
func FreePorts(n int) ([]int, error) {
	dir := portLockDir()
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("free port: %w", err)
	}
	lo, hi := portRange()
	ports := make([]int, 0, n)
	for attempts := 0; len(ports) < n; attempts++ {
		if attempts > 4*(hi-lo) {
			return nil, fmt.Errorf("free port: no free port in [%d, %d) after %d attempts", lo, hi, attempts)
		}
		port := lo + rand.IntN(hi-lo)
		ok, err := reservePort(dir, port)
		if err != nil {
			return nil, err
		}
		if ok {
			ports = append(ports, port)
		}
	}
	return ports, nil
}

// reservePort takes the port's lock file and checks that the port can be bound. The lock's file
// descriptor is deliberately never closed: the reservation lasts until the process exits, and the
// kernel releases it then even when the process is killed.
func reservePort(dir string, port int) (bool, error) {
	// A raw descriptor, not an *os.File: the File's finalizer would close it, and so release the
	// lock, once the garbage collector runs.
	fd, err := syscall.Open(filepath.Join(dir, strconv.Itoa(port)), syscall.O_CREAT|syscall.O_RDWR|syscall.O_CLOEXEC, 0o666)
	if err != nil {
		return false, fmt.Errorf("free port: %w", err)
	}
	if err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = syscall.Close(fd)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return false, nil // another test process (or this one) holds it
		}
		return false, fmt.Errorf("free port: lock %d: %w", port, err)
	}
	if l, err := net.Listen("tcp", ":"+strconv.Itoa(port)); err == nil {
		_ = l.Close()
		return true, nil
	}
	// In use by something outside the tests: not an error, the caller tries the next port.
	_ = syscall.Close(fd)
	return false, nil
}
