package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/azure-ccm/azure-ccm/test/framework"
)

// keyRow is one row of a key table of docs/configuration.md.
type keyRow struct {
	keys    []string // lower-cased
	meaning string
	line    string // the whole row
}

var (
	backticked = regexp.MustCompile("`([A-Za-z0-9]+)`")
	acceptedRe = regexp.MustCompile(`\*Accepted\*`)
)

// keyRows reads the tables of the "## Keys" section: the first cell names keys in backticks,
// the last cell says what the CCM does with them.
func keyRows(t *testing.T, doc string) []keyRow {
	t.Helper()
	_, keys, ok := strings.Cut(doc, "\n## Keys\n")
	if !ok {
		t.Fatal("docs/configuration.md has no \"## Keys\" section")
	}
	var rows []keyRow
	for _, line := range strings.Split(keys, "\n") {
		if strings.HasPrefix(line, "## ") {
			break
		}
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) < 2 {
			continue
		}
		r := keyRow{meaning: strings.TrimSpace(cells[len(cells)-1]), line: line}
		for _, m := range backticked.FindAllStringSubmatch(cells[0], -1) {
			r.keys = append(r.keys, strings.ToLower(m[1]))
		}
		rows = append(rows, r)
	}
	return rows
}

// acceptedReason returns the reason given after *Accepted*, or "" when the row does not mark
// the key accepted.
func acceptedReason(meaning string) (string, bool) {
	loc := acceptedRe.FindStringIndex(meaning)
	if loc == nil {
		return "", false
	}
	rest := meaning[:loc[0]] + meaning[loc[1]:]
	return strings.Trim(rest, " .,;:()"), true
}

// TestConfigFieldsReadOrAccepted: every key of azure.json (config.Config) is read by the code
// linked into the binaries, outside internal/config (parsing, defaults and validation are no
// use), or docs/configuration.md marks it *Accepted* with the reason. A key documented as
// *Accepted* that the code does read fails too: the document would say it does nothing.
func TestConfigFieldsReadOrAccepted(t *testing.T) {
	root := framework.RepoRoot()
	linked, err := LinkedPackages(root, binaries...)
	if err != nil {
		t.Fatal(err)
	}
	var ours []string
	for _, p := range linked {
		if strings.HasPrefix(p.ImportPath, "github.com/azure-ccm/azure-ccm/") {
			ours = append(ours, p.ImportPath)
		}
	}
	fields, err := ConfigFieldReads(root, ours)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]keyRow{}
	for _, r := range keyRows(t, string(b)) {
		for _, k := range r.keys {
			rows[k] = r
		}
	}
	read := 0
	for _, f := range fields {
		row, documented := rows[strings.ToLower(f.Key)]
		reason, accepted := acceptedReason(row.meaning)
		switch {
		case !documented:
			t.Errorf("`%s` (config.Config.%s) has no row in the key tables of docs/configuration.md", f.Key, f.Name)
		case len(f.ReadBy) == 0 && !accepted:
			t.Errorf("`%s` (config.Config.%s) is read nowhere outside internal/config, and docs/configuration.md does not mark it *Accepted* with the reason: make it work, or document it as accepted-but-inert", f.Key, f.Name)
		case len(f.ReadBy) == 0 && len(strings.Fields(reason)) < 3:
			t.Errorf("`%s` is *Accepted* in docs/configuration.md without a reason (%q): say why it changes nothing", f.Key, row.meaning)
		case len(f.ReadBy) > 0 && accepted:
			t.Errorf("`%s` is marked *Accepted* (inert) in docs/configuration.md, but the code reads it: %s", f.Key, strings.Join(f.ReadBy, ", "))
		}
		if len(f.ReadBy) > 0 {
			read++
		}
	}
	// A scan that finds (almost) nothing is broken, not a sign of an inert configuration.
	if len(fields) < 50 || read < 40 {
		t.Errorf("scan found %d fields, %d of them read: the scan is broken", len(fields), read)
	}
}
