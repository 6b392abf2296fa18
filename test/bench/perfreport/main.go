// Command perfreport renders docs/performance/README.md and its PNG plots from the JSON results
// the benchmark scenarios (test/bench) wrote to docs/performance/results. It is a module of its
// own so that the plotting library and its fonts stay out of the product module: run it as
// `cd test/bench/perfreport && go run . -results … -out …` (hack/bench.sh does).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/azure-ccm/azure-ccm/test/bench/report"
)

func main() {
	results := flag.String("results", "docs/performance/results", "directory of <scenario>.json results")
	out := flag.String("out", "docs/performance", "directory for README.md and plots/")
	flag.Parse()
	if err := run(*results, *out); err != nil {
		fmt.Fprintln(os.Stderr, "perfreport:", err)
		os.Exit(1)
	}
}

func run(resultsDir, out string) error {
	rs, err := report.Load(resultsDir)
	if err != nil {
		return err
	}
	if len(rs) == 0 {
		return fmt.Errorf("no results in %s (run `make bench` first)", resultsDir)
	}
	md, plots := report.Render(rs)
	for _, p := range plots {
		if err := Draw(out, p); err != nil {
			return err
		}
	}
	path := filepath.Join(out, "README.md")
	if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s with %d scenarios and %d plots\n", path, len(rs), len(plots))
	return nil
}
