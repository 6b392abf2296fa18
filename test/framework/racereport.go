package framework

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
)

// EnvBinDir names another directory to take the project's binaries from instead of
// _output/bin: hack/test.sh points it at race-detector builds (`go build -race`) for the
// end-to-end suites, so that a data race in the CCM, the node manager or the disk provisioner
// under a real cluster fails the test that ran it (see RaceReports).
const EnvBinDir = "AZURE_CCM_BIN_DIR"

// raceMarker starts every report of the race detector.
const raceMarker = "WARNING: DATA RACE"

// raceReportLines bounds how much of one report a failure message carries: the two stacks
// and the goroutines' origins fit in it; the whole log is in the test's artifacts.
const raceReportLines = 80

// RaceReports returns the race detector's reports found in the log files of dir, each with
// the log's name and the report's first lines. Only binaries built with -race print them.
func RaceReports(dir string) []string {
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	var reports []string
	for _, f := range files {
		reports = append(reports, raceReportsIn(f)...)
	}
	return reports
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
