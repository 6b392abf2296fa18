package framework

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

func TestFreePortsOutsideEphemeralRangeAndDistinct(t *testing.T) {
	lo, hi := portRange()
	seen := map[int]bool{}
	for range 20 {
		ports, err := FreePorts(5)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ports {
			if p < lo || p >= hi {
				t.Errorf("port %d outside [%d, %d)", p, lo, hi)
			}
			if seen[p] {
				t.Errorf("port %d handed out twice", p)
			}
			seen[p] = true
		}
	}
}

// A port reserved by another process is never handed out: the child process reserves ports
// and prints them while this one keeps asking.
func TestFreePortsNotSharedAcrossProcesses(t *testing.T) {
	if os.Getenv("FRAMEWORK_PORTS_CHILD") == "1" {
		ports, err := FreePorts(200)
		if err != nil {
			os.Exit(2)
		}
		for _, p := range ports {
			if _, err := os.Stdout.WriteString(strconv.Itoa(p) + "\n"); err != nil {
				os.Exit(2)
			}
		}
		// Hold the reservations until the parent closes stdin.
		_, _ = os.Stdin.Read(make([]byte, 1))
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFreePortsNotSharedAcrossProcesses$")
	cmd.Env = append(os.Environ(), "FRAMEWORK_PORTS_CHILD=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stdin.Close(); _ = cmd.Wait() }()
	var out strings.Builder
	buf := make([]byte, 4096)
	for strings.Count(out.String(), "\n") < 200 {
		n, err := stdout.Read(buf)
		out.Write(buf[:n])
		if err != nil {
			t.Fatalf("child: %v after %q", err, out.String())
		}
	}
	child := map[int]bool{}
	for _, f := range strings.Fields(out.String()) {
		p, _ := strconv.Atoi(f)
		child[p] = true
	}
	lo, hi := portRange()
	mine, err := FreePorts((hi - lo) / 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range mine {
		if child[p] {
			t.Fatalf("port %d reserved by the child process was handed out here", p)
		}
	}
}
