package framework

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// ProcUsage is what the kernel accounts for one live process.
type ProcUsage struct {
	// CPUSeconds is user + system CPU time since the process started.
	CPUSeconds float64
	// RSSBytes is the resident set now; PeakRSSBytes its high-water mark (VmHWM).
	RSSBytes, PeakRSSBytes int64
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times; 100 on every Linux architecture Go
// supports (the kernel keeps it fixed for user space).
const clockTicks = 100

// ReadProcUsage reads /proc/<pid>/stat and /proc/<pid>/status.
func ReadProcUsage(pid int) (ProcUsage, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcUsage{}, err
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcUsage{}, err
	}
	return parseProcUsage(stat, status)
}

// parseProcUsage takes utime and stime (fields 14 and 15 of stat, counted after the
// parenthesised command name, which may hold spaces) and VmRSS / VmHWM from status.
func parseProcUsage(stat, status []byte) (ProcUsage, error) {
	var u ProcUsage
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return u, fmt.Errorf("proc stat: no command name")
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return u, fmt.Errorf("proc stat: %d fields", len(f)+2)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return u, fmt.Errorf("proc stat: utime %q stime %q", f[11], f[12])
	}
	u.CPUSeconds = float64(ut+st) / clockTicks
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) == 0 {
			continue
		}
		kb, err := strconv.ParseInt(fs[0], 10, 64)
		if err != nil {
			return u, fmt.Errorf("proc status %s: %w", k, err)
		}
		if k == "VmRSS" {
			u.RSSBytes = kb << 10
		} else {
			u.PeakRSSBytes = kb << 10
		}
	}
	return u, nil
}

// CCMUsage is the running CCM's CPU time and memory.
func (e *Env) CCMUsage() (ProcUsage, error) {
	p := e.CCM()
	if p == nil {
		return ProcUsage{}, fmt.Errorf("the CCM is not running")
	}
	return ReadProcUsage(p.PID())
}

// CCMMetrics returns the running CCM's /metrics text (the framework's CCM allows anonymous
// reads of /metrics).
func (e *Env) CCMMetrics(ctx context.Context) (string, error) {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // the CCM's self-signed serving cert
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", e.CCMPort()), nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("CCM /metrics: %s", resp.Status)
	}
	return string(body), nil
}
