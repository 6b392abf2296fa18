package framework

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
)

// parseVersionsEnv reads KEY=VALUE lines of hack/versions.env, ignoring comments and blanks.
func parseVersionsEnv(data []byte) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		out[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"'`)
	}
	return out
}

// PinnedVersions are the tool versions of hack/versions.env (empty if it cannot be read).
func PinnedVersions() map[string]string {
	b, err := os.ReadFile(filepath.Join(RepoRoot(), "hack", "versions.env"))
	if err != nil {
		return map[string]string{}
	}
	return parseVersionsEnv(b)
}
