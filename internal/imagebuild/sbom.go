package imagebuild

import (
	"encoding/json"
	"fmt"
	"runtime/debug"
	"strings"
	"time"
)

// The subset of SPDX 2.3 JSON that SPDX writes.
type (
	spdxDoc struct {
		SPDXVersion       string             `json:"spdxVersion"`
		DataLicense       string             `json:"dataLicense"`
		SPDXID            string             `json:"SPDXID"`
		Name              string             `json:"name"`
		DocumentNamespace string             `json:"documentNamespace"`
		CreationInfo      spdxCreation       `json:"creationInfo"`
		Packages          []spdxPackage      `json:"packages"`
		Relationships     []spdxRelationship `json:"relationships"`
	}
	spdxCreation struct {
		Created  string   `json:"created"`
		Creators []string `json:"creators"`
	}
	spdxPackage struct {
		SPDXID           string            `json:"SPDXID"`
		Name             string            `json:"name"`
		Version          string            `json:"versionInfo,omitempty"`
		DownloadLocation string            `json:"downloadLocation"`
		FilesAnalyzed    bool              `json:"filesAnalyzed"`
		Checksums        []spdxChecksum    `json:"checksums,omitempty"`
		ExternalRefs     []spdxExternalRef `json:"externalRefs,omitempty"`
		PrimaryPurpose   string            `json:"primaryPackagePurpose,omitempty"`
		Comment          string            `json:"comment,omitempty"`
	}
	spdxChecksum struct {
		Algorithm string `json:"algorithm"`
		Value     string `json:"checksumValue"`
	}
	spdxExternalRef struct {
		Category string `json:"referenceCategory"`
		Type     string `json:"referenceType"`
		Locator  string `json:"referenceLocator"`
	}
	spdxRelationship struct {
		Element string `json:"spdxElementId"`
		Type    string `json:"relationshipType"`
		Related string `json:"relatedSpdxElement"`
	}
)

// SPDX is an SPDX 2.3 JSON document for one binary, from its embedded build information
// (debug/buildinfo): the binary, its main module, the Go standard library and every module it
// links (a replacement stands for the module it replaces), each module with a Go package URL,
// and the build settings in the binary's comment. binarySHA256 (hex) also names the document,
// so the same binary and time always give the same bytes.
func SPDX(name string, bi *debug.BuildInfo, binarySHA256 string, created time.Time) ([]byte, error) {
	if bi == nil {
		return nil, fmt.Errorf("%s: no build information", name)
	}
	var settings []string
	for _, s := range bi.Settings {
		settings = append(settings, s.Key+"="+s.Value)
	}
	bin := spdxPackage{
		SPDXID:           "SPDXRef-Package-binary",
		Name:             name,
		Version:          bi.Main.Version,
		DownloadLocation: "NOASSERTION",
		Checksums:        []spdxChecksum{{Algorithm: "SHA256", Value: binarySHA256}},
		PrimaryPurpose:   "APPLICATION",
		Comment:          "Go package " + bi.Path + "; build settings: " + strings.Join(settings, " "),
	}
	goVersion := strings.TrimPrefix(bi.GoVersion, "go")
	stdlib := spdxPackage{
		SPDXID:           "SPDXRef-Package-stdlib",
		Name:             "stdlib",
		Version:          goVersion,
		DownloadLocation: "NOASSERTION",
		ExternalRefs:     []spdxExternalRef{purl("stdlib", goVersion)},
	}
	d := spdxDoc{
		SPDXVersion:       "SPDX-2.3",
		DataLicense:       "CC0-1.0",
		SPDXID:            "SPDXRef-DOCUMENT",
		Name:              name,
		DocumentNamespace: "https://spdx.org/spdxdocs/" + name + "-" + binarySHA256,
		CreationInfo: spdxCreation{
			Created:  created.UTC().Format(time.RFC3339),
			Creators: []string{"Tool: azure-ccm hack/images"},
		},
		Packages: []spdxPackage{bin, modulePackage("SPDXRef-Package-main", &bi.Main), stdlib},
		Relationships: []spdxRelationship{
			{Element: "SPDXRef-DOCUMENT", Type: "DESCRIBES", Related: bin.SPDXID},
			{Element: bin.SPDXID, Type: "DEPENDS_ON", Related: "SPDXRef-Package-main"},
			{Element: bin.SPDXID, Type: "DEPENDS_ON", Related: stdlib.SPDXID},
		},
	}
	for i, dep := range bi.Deps {
		if dep.Replace != nil {
			dep = dep.Replace
		}
		p := modulePackage(fmt.Sprintf("SPDXRef-Package-module-%d", i), dep)
		d.Packages = append(d.Packages, p)
		d.Relationships = append(d.Relationships, spdxRelationship{Element: bin.SPDXID, Type: "DEPENDS_ON", Related: p.SPDXID})
	}
	return json.MarshalIndent(d, "", "  ")
}

func modulePackage(id string, m *debug.Module) spdxPackage {
	p := spdxPackage{SPDXID: id, Name: m.Path, Version: m.Version, DownloadLocation: "NOASSERTION"}
	if m.Version != "" {
		p.ExternalRefs = []spdxExternalRef{purl(m.Path, m.Version)}
	}
	if m.Sum != "" {
		p.Comment = "go.sum " + m.Sum
	}
	return p
}

// purl is the package URL of a Go module (the purl spec's golang type).
func purl(path, version string) spdxExternalRef {
	return spdxExternalRef{Category: "PACKAGE-MANAGER", Type: "purl", Locator: "pkg:golang/" + path + "@" + version}
}
