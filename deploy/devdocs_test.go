package deploy

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/azure-ccm/azure-ccm/test/framework"
)

// The contributor pages name packages, files and tests of the tree; these tests keep them true.

var (
	// rootedPath: a path from the repository root (internal/writer, deploy/azure/*.json).
	rootedPath = regexp.MustCompile(`(?:^|[^A-Za-z0-9_./<>-])((?:\.ci|build|cmd|deploy|docs|hack|internal|test)/[A-Za-z0-9_.*/-]*)`)
	// codeSpan is a `...` span; packagePath one that names a package below internal/ without
	// the prefix (loadbalancer/plan, controllers/adminstate/planner).
	codeSpan    = regexp.MustCompile("`([^`\n]+)`")
	packagePath = regexp.MustCompile(`^[a-z0-9]+(?:/[a-z0-9]+)+$`)
	// mdLink is a relative Markdown link target.
	mdLink = regexp.MustCompile(`\]\(([^)#:\s]+)(?:#[^)]*)?\)`)
	// testName is a Go test or fuzz target; <TestName> is a placeholder.
	testName = regexp.MustCompile(`(?:^|[^<\w])((?:Test|Fuzz)[A-Z]\w*)`)
	goFunc   = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz)[A-Z]\w*)\(`)
	// processSpeak is how a log of the work speaks, not a description of the code.
	processSpeak = regexp.MustCompile(`(?i)session [0-9]|session's|issue [0-9]`)
)

// devDocs returns docs/dev/*.md by repository-relative path.
func devDocs(t *testing.T, root string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "dev", "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no docs/dev/*.md under %s (%v)", root, err)
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		out[filepath.ToSlash(rel)] = string(b)
	}
	return out
}

// exists reports whether a repository-relative path (possibly a glob) names something. A
// package path followed by .Name (internal/controllers.Initializers) needs a Go file of that
// package to declare Name.
func exists(root, p string) bool {
	p = strings.TrimRight(p, ".,;:")
	if strings.ContainsAny(p, "*?[") {
		m, _ := filepath.Glob(filepath.Join(root, filepath.FromSlash(p)))
		return len(m) > 0
	}
	if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(p))); err == nil {
		return true
	}
	i := strings.LastIndex(p, ".")
	if i < 0 || i+1 >= len(p) || p[i+1] < 'A' || p[i+1] > 'Z' {
		return false
	}
	files, _ := filepath.Glob(filepath.Join(root, filepath.FromSlash(p[:i]), "*.go"))
	decl := regexp.MustCompile(`(?m)^(?:func(?: \([^)]*\))?|type|var|const)\s+` + regexp.QuoteMeta(p[i+1:]) + `\b|^\s+` + regexp.QuoteMeta(p[i+1:]) + `\s*=`)
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && decl.Match(b) {
			return true
		}
	}
	return false
}

// walkSources calls f for every file of the tree, skipping .git, _output and other hidden or
// underscore directories (as the go tool does).
func walkSources(t *testing.T, root string, f func(rel, path string)) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		f(filepath.ToSlash(rel), path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDevDocsNameWhatExists: every path from the repository root, every package path below
// internal/, every relative link and every Test/Fuzz function that docs/dev names exists.
func TestDevDocsNameWhatExists(t *testing.T) {
	root := framework.RepoRoot()
	funcs := map[string]bool{}
	walkSources(t, root, func(rel, path string) {
		if !strings.HasSuffix(rel, "_test.go") {
			return
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range goFunc.FindAllStringSubmatch(string(b), -1) {
			funcs[m[1]] = true
		}
	})
	checked := 0
	for doc, text := range devDocs(t, root) {
		missing := map[string]bool{}
		for _, m := range rootedPath.FindAllStringSubmatch(text, -1) {
			checked++
			if !exists(root, m[1]) {
				missing[m[1]] = true
			}
		}
		for _, m := range codeSpan.FindAllStringSubmatch(text, -1) {
			if packagePath.MatchString(m[1]) && !exists(root, "internal/"+m[1]) && !exists(root, m[1]) {
				missing[m[1]] = true
			}
		}
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			checked++
			if !exists(root, filepath.ToSlash(filepath.Join(filepath.Dir(doc), m[1]))) {
				missing[m[1]] = true
			}
		}
		for _, m := range testName.FindAllStringSubmatch(text, -1) {
			checked++
			if !funcs[m[1]] {
				missing[m[1]+" (no such func)"] = true
			}
		}
		var list []string
		for p := range missing {
			list = append(list, p)
		}
		sort.Strings(list)
		for _, p := range list {
			t.Errorf("%s names %s, which is not in the tree", doc, p)
		}
	}
	if checked < 50 {
		t.Errorf("only %d names found in docs/dev: the scan is broken", checked)
	}
}

// TestNoProcessSpeak: docs and code describe the code, not the work that produced it (no work
// periods, no issue numbers). Benchmark results keep their dates and commits: they are
// measurement metadata, not prose.
func TestNoProcessSpeak(t *testing.T) {
	root := framework.RepoRoot()
	self := "deploy/devdocs_test.go"
	n := 0
	walkSources(t, root, func(rel, path string) {
		text := strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, ".md") || strings.HasSuffix(rel, ".sh") ||
			(strings.HasPrefix(rel, "docs/") && !strings.HasSuffix(rel, ".png"))
		if !text || rel == self {
			return
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		n++
		for i, line := range strings.Split(string(b), "\n") {
			if m := processSpeak.FindString(line); m != "" {
				t.Errorf("%s:%d: %q: say what the code does, not how the work went", rel, i+1, m)
			}
		}
	})
	if n < 100 {
		t.Errorf("only %d files scanned: the walk is broken", n)
	}
}

// TestWriterSetsBuiltInTwoPlaces: writer registries are built by writers.New (each provider's
// real set) and dryrun.NewSet (its recording twin) only, as docs/dev/README.md says; anything
// else would give a resource a second writer.
func TestWriterSetsBuiltInTwoPlaces(t *testing.T) {
	root := framework.RepoRoot()
	want := []string{"internal/dryrun/set.go", "internal/writers/writers.go"}
	build := regexp.MustCompile(`writer\.NewRegistry\(|writer\.New\[`)
	var got []string
	walkSources(t, root, func(rel, path string) {
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if build.Match(b) {
			got = append(got, rel)
		}
	})
	sort.Strings(got)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("writer registries are built in %v, want only %v (update docs/dev/README.md and this test if that changed on purpose)", got, want)
	}
}
