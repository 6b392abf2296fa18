package imagebuild

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// epoch is 2026-01-01T00:00:00Z.
func epoch() time.Time { return time.Unix(1767225600, 0) }

func TestLayerTarIsSortedAndFixed(t *testing.T) {
	files := append(BaseFiles(), BinaryFile("azsim", []byte("binary")))
	a, err := LayerTar(files, epoch())
	if err != nil {
		t.Fatal(err)
	}
	// The same files in another order give the same bytes.
	reversed := make([]File, len(files))
	for i, f := range files {
		reversed[len(files)-1-i] = f
	}
	b, err := LayerTar(reversed, epoch())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("the layer depends on the order of its files")
	}
	type entry struct {
		name       string
		mode       int64
		uid, gid   int
		uname      string
		mtime      time.Time
		typeflag   byte
		contentLen int64
	}
	var got []entry
	tr := tar.NewReader(bytes.NewReader(a))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, entry{h.Name, h.Mode, h.Uid, h.Gid, h.Uname, h.ModTime, h.Typeflag, h.Size})
	}
	want := []entry{
		{"azsim", 0o555, 0, 0, "", epoch(), tar.TypeReg, 6},
		{"etc/", 0o755, 0, 0, "", epoch(), tar.TypeDir, 0},
		{"etc/group", 0o644, 0, 0, "", epoch(), tar.TypeReg, int64(len("root:x:0:\nnonroot:x:65532:\n"))},
		{"etc/passwd", 0o644, 0, 0, "", epoch(), tar.TypeReg, got[3].contentLen},
		{"home/", 0o755, 0, 0, "", epoch(), tar.TypeDir, 0},
		{"home/nonroot/", 0o700, 65532, 65532, "", epoch(), tar.TypeDir, 0},
		{"tmp/", 0o1777, 0, 0, "", epoch(), tar.TypeDir, 0},
	}
	if len(got) != len(want) {
		t.Fatalf("entries %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].name != want[i].name || got[i].mode != want[i].mode || got[i].uid != want[i].uid ||
			got[i].gid != want[i].gid || got[i].uname != want[i].uname || !got[i].mtime.Equal(want[i].mtime) ||
			got[i].typeflag != want[i].typeflag || got[i].contentLen != want[i].contentLen {
			t.Errorf("entry %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestLayerTarRejects(t *testing.T) {
	for name, files := range map[string][]File{
		"missing parent": {{Path: "etc/passwd", Mode: 0o644}},
		"absolute":       {{Path: "/azsim", Mode: 0o555}},
		"unclean":        {{Path: "etc", Dir: true, Mode: 0o755}, {Path: "etc/../x", Mode: 0o644}},
		"twice":          {{Path: "x", Mode: 0o644}, {Path: "x", Mode: 0o644}},
	} {
		if _, err := LayerTar(files, epoch()); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestBaseFilesNameNonRoot(t *testing.T) {
	var passwd, group string
	for _, f := range BaseFiles() {
		switch f.Path {
		case "etc/passwd":
			passwd = string(f.Content)
		case "etc/group":
			group = string(f.Content)
		}
	}
	if !strings.Contains(passwd, "nonroot:x:65532:65532:") || !strings.Contains(group, "nonroot:x:65532:") {
		t.Errorf("passwd %q / group %q do not name uid/gid 65532", passwd, group)
	}
}

func testMeta() Meta {
	return Meta{Source: "https://example.com/repo", Revision: "abc123", Version: "v1.2.3-gabc123", Created: epoch()}
}

func TestImageIsDeterministicAndLabelled(t *testing.T) {
	build := func(content string) string {
		var digests []string
		for _, arch := range []string{"amd64", "arm64"} {
			img, err := Image(Binary{Name: "azsim", OS: "linux", Arch: arch, Content: []byte(content + arch)}, testMeta())
			if err != nil {
				t.Fatal(err)
			}
			d, err := img.Digest()
			if err != nil {
				t.Fatal(err)
			}
			digests = append(digests, d.String())
		}
		return strings.Join(digests, " ")
	}
	if a, b := build("x"), build("x"); a != b {
		t.Errorf("two builds of the same binaries: %s != %s", a, b)
	}
	if a, b := build("x"), build("y"); a == b {
		t.Errorf("different binaries gave the same digests %s", a)
	}

	img, err := Image(Binary{Name: "azsim", OS: "linux", Arch: "arm64", Content: []byte("x")}, testMeta())
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Architecture != "arm64" || cf.OS != "linux" || cf.Config.User != "65532:65532" ||
		strings.Join(cf.Config.Entrypoint, " ") != "/azsim" || !cf.Created.Time.Equal(epoch()) {
		t.Errorf("config %+v", cf)
	}
	wantLabels := map[string]string{
		"org.opencontainers.image.source":   "https://example.com/repo",
		"org.opencontainers.image.revision": "abc123",
		"org.opencontainers.image.version":  "v1.2.3-gabc123",
		"org.opencontainers.image.created":  "2026-01-01T00:00:00Z",
	}
	for k, v := range wantLabels {
		if cf.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, cf.Config.Labels[k], v)
		}
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != "application/vnd.oci.image.manifest.v1+json" || len(m.Layers) != 2 ||
		m.Layers[0].MediaType != "application/vnd.oci.image.layer.v1.tar+gzip" {
		t.Errorf("manifest %+v", m)
	}

	arm := img
	amd, err := Image(Binary{Name: "azsim", OS: "linux", Arch: "amd64", Content: []byte("x")}, testMeta())
	if err != nil {
		t.Fatal(err)
	}
	idx, err := Index([]v1.Image{amd, arm}, testMeta())
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != "application/vnd.oci.image.index.v1+json" || len(im.Manifests) != 2 ||
		im.Manifests[0].Platform.Architecture != "amd64" || im.Manifests[1].Platform.Architecture != "arm64" ||
		im.Annotations["org.opencontainers.image.revision"] != "abc123" {
		t.Errorf("index %+v", im)
	}
}

func TestSPDXFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Path:      "github.com/azure-ccm/azure-ccm/cmd/azsim",
		Main:      debug.Module{Path: "github.com/azure-ccm/azure-ccm", Version: "v0.0.0-20260101000000-abc123"},
		Deps: []*debug.Module{
			{Path: "golang.org/x/sync", Version: "v0.24.0", Sum: "h1:x"},
			{Path: "example.com/old", Version: "v1.0.0", Replace: &debug.Module{Path: "example.com/new", Version: "v2.0.0"}},
		},
		Settings: []debug.BuildSetting{{Key: "CGO_ENABLED", Value: "0"}, {Key: "vcs.revision", Value: "abc123"}},
	}
	b, err := SPDX("azsim", bi, "deadbeef", epoch())
	if err != nil {
		t.Fatal(err)
	}
	again, err := SPDX("azsim", bi, "deadbeef", epoch())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, again) {
		t.Error("the same build information gave two documents")
	}
	var doc struct {
		SPDXVersion       string `json:"spdxVersion"`
		DocumentNamespace string `json:"documentNamespace"`
		CreationInfo      struct{ Created string }
		Packages          []struct {
			SPDXID       string `json:"SPDXID"`
			Name         string `json:"name"`
			Version      string `json:"versionInfo"`
			Comment      string `json:"comment"`
			ExternalRefs []struct {
				Locator string `json:"referenceLocator"`
			} `json:"externalRefs"`
		} `json:"packages"`
		Relationships []struct {
			Element string `json:"spdxElementId"`
			Type    string `json:"relationshipType"`
			Related string `json:"relatedSpdxElement"`
		} `json:"relationships"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.CreationInfo.Created != "2026-01-01T00:00:00Z" ||
		!strings.HasSuffix(doc.DocumentNamespace, "azsim-deadbeef") {
		t.Errorf("document %+v", doc)
	}
	purls := map[string]bool{}
	for _, p := range doc.Packages {
		for _, r := range p.ExternalRefs {
			purls[r.Locator] = true
		}
	}
	for _, want := range []string{
		"pkg:golang/github.com/azure-ccm/azure-ccm@v0.0.0-20260101000000-abc123",
		"pkg:golang/stdlib@1.26.8",
		"pkg:golang/golang.org/x/sync@v0.24.0",
		"pkg:golang/example.com/new@v2.0.0",
	} {
		if !purls[want] {
			t.Errorf("no package %s in %v", want, purls)
		}
	}
	if purls["pkg:golang/example.com/old@v1.0.0"] {
		t.Error("a replaced module is listed instead of its replacement")
	}
	if !strings.Contains(doc.Packages[0].Comment, "vcs.revision=abc123") {
		t.Errorf("binary package comment %q lacks the build settings", doc.Packages[0].Comment)
	}
	deps := 0
	for _, r := range doc.Relationships {
		if r.Element == "SPDXRef-Package-binary" && r.Type == "DEPENDS_ON" {
			deps++
		}
	}
	if deps != 4 {
		t.Errorf("%d DEPENDS_ON relationships, want 4 (main module, stdlib, two modules)", deps)
	}
	if _, err := SPDX("azsim", nil, "x", epoch()); err == nil {
		t.Error("no build information: no error")
	}
}
