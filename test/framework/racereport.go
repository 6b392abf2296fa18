package framework

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
)

// EnvBinDir names another directory to take the project's binaries from instead of
// _output/bin: hack/test.sh points it at race-detector builds (`go build -race -tags testhooks`) for the
// end-to-end suites, so that a data race in the CCM, the node manager or the disk provisioner
// under a real cluster fails the test that ran it (see RaceReports).
const EnvBinDir = "AZURE_CCM_BIN_DIR"

// raceMarker starts every report of the race detector.
const raceMarker = "WARNING: DATA RACE"

// raceReportLines bounds how much of one report a failure message carries: the two stacks
// and the goroutines' origins fit in it; the whole log is in the test's artifacts.
const raceReportLines = 80

// UpstreamRace is a data race inside a dependency that the project cannot fix in its own code:
// the two functions whose accesses race (the top frames of the report's two stacks) and why
// it is listed. A report matching one is logged instead of failing the test; every other
// report, in the project's code or elsewhere in a dependency, fails it.
type UpstreamRace struct {
	Access, PreviousAccess string
	Reason                 string
}

// KnownUpstreamRaces returns the races of dependencies the binaries are known to report.
func KnownUpstreamRaces() []UpstreamRace {
	return []UpstreamRace{{
		// The service controller writes cachedService.state outside the cache's lock while its
		// node sync reads every cached state under it. The state is a pointer to an informer's
		// object, replaced whole; the reader sees the old or the new service.
		Access:         "k8s.io/cloud-provider/controllers/service.(*serviceCache).allServices",
		PreviousAccess: "k8s.io/cloud-provider/controllers/service.(*Controller).processServiceCreateOrUpdate",
		Reason:         "k8s.io/cloud-provider's service controller stores a service in its cache entry without the cache's lock",
	}}
}

// RaceReports returns the race detector's reports found in the log files of dir, each with
// the log's name and the report's first lines, split into the reports of known upstream
// races (known) and all others (unknown). Only binaries built with -race print them.
func RaceReports(dir string, knownRaces []UpstreamRace) (unknown, known []string) {
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range files {
		for _, r := range raceReportsIn(f) {
			if k, ok := matchUpstream(r, knownRaces); ok {
				known = append(known, k.Reason+" — "+r)
				continue
			}
			unknown = append(unknown, r)
		}
	}
	return unknown, known
}

// matchUpstream finds the known race whose two functions are the top frames of the report's
// two stacks, in either order (which goroutine the detector catches second varies).
func matchUpstream(report string, knownRaces []UpstreamRace) (UpstreamRace, bool) {
	top := topFrames(report)
	if len(top) < 2 {
		return UpstreamRace{}, false
	}
	for _, k := range knownRaces {
		if (top[0] == k.Access && top[1] == k.PreviousAccess) || (top[0] == k.PreviousAccess && top[1] == k.Access) {
			return k, true
		}
	}
	return UpstreamRace{}, false
}

// topFrames returns the function of the first frame under each access line ("Read at …",
// "Previous write at …") of a report: a frame's function line is indented and ends with
// its arguments' parentheses.
func topFrames(report string) []string {
	var top []string
	lines := strings.Split(report, "\n")
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if !strings.Contains(t, " at 0x") || !strings.Contains(t, " by ") || i+1 >= len(lines) {
			continue
		}
		fn := strings.TrimSpace(lines[i+1])
		if p := strings.LastIndex(fn, "("); p > 0 && strings.HasSuffix(fn, ")") {
			fn = fn[:p]
		}
		top = append(top, fn)
	}
	return top
}

func raceReportsIn(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var reports []string
	var cur []string
	flush := func() {
		if cur != nil {
			reports = append(reports, filepath.Base(path)+":\n"+strings.Join(cur, "\n"))
			cur = nil
		}
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.Contains(line, raceMarker):
			flush()
			cur = []string{line}
		case cur != nil && strings.HasPrefix(line, "=================="):
			flush()
		case cur != nil && len(cur) < raceReportLines:
			cur = append(cur, line)
		}
	}
	flush()
	return reports
}
