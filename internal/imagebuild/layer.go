// Package imagebuild makes the project's container images from static binaries without a
// daemon or a base image to pull: a base layer it writes itself (passwd, group, /tmp), one layer
// per binary, an OCI config with the image labels, a multi-arch index, and an SPDX SBOM read from
// the binary's build information. Everything is a function of its inputs: the same binaries and
// the same timestamp give the same digests.
package imagebuild

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// NonRoot is the uid and gid the images run as (the distroless "nonroot" convention).
const NonRoot = 65532

// File is one entry of a layer. Dir entries have no content.
type File struct {
	Path    string // relative to /, without a leading slash
	Mode    int64  // permission bits, plus ISVTX for a sticky directory
	UID     int
	GID     int
	Dir     bool
	Content []byte
}

// BaseFiles is the minimal filesystem every image starts from: a passwd and group that name
// root and the non-root user (so tools resolving uid 65532 find a name and a home), and a
// world-writable sticky /tmp. CA roots are not here: the binaries carry their own.
func BaseFiles() []File {
	passwd := "root:x:0:0:root:/root:/sbin/nologin\n" +
		fmt.Sprintf("nonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRoot, NonRoot)
	group := "root:x:0:\n" + fmt.Sprintf("nonroot:x:%d:\n", NonRoot)
	return []File{
		{Path: "etc", Dir: true, Mode: 0o755},
		{Path: "etc/passwd", Mode: 0o644, Content: []byte(passwd)},
		{Path: "etc/group", Mode: 0o644, Content: []byte(group)},
		{Path: "home", Dir: true, Mode: 0o755},
		{Path: "home/nonroot", Dir: true, Mode: 0o700, UID: NonRoot, GID: NonRoot},
		{Path: "tmp", Dir: true, Mode: 0o1777},
	}
}

// BinaryFile is a binary at /NAME, owned by root and not writable by anyone.
func BinaryFile(name string, content []byte) File {
	return File{Path: name, Mode: 0o555, Content: content}
}

// LayerTar writes files as a tar stream sorted by path, each with the same modification time
// and no user or group names, so the bytes depend only on the files and mtime. Parent
// directories missing from files are an error rather than implied: a tar without them unpacks
// with runtime-chosen modes.
func LayerTar(files []File, mtime time.Time) ([]byte, error) {
	sorted := append([]File(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	seen := map[string]bool{}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range sorted {
		if f.Path == "" || strings.HasPrefix(f.Path, "/") || path.Clean(f.Path) != f.Path {
			return nil, fmt.Errorf("layer entry %q: want a clean relative path", f.Path)
		}
		if seen[f.Path] {
			return nil, fmt.Errorf("layer entry %q twice", f.Path)
		}
		if dir := path.Dir(f.Path); dir != "." && !seen[dir] {
			return nil, fmt.Errorf("layer entry %q: parent directory %q is not in the layer", f.Path, dir)
		}
		seen[f.Path] = true
		h := &tar.Header{
			Name:    f.Path,
			Mode:    f.Mode,
			Uid:     f.UID,
			Gid:     f.GID,
			ModTime: mtime.UTC(),
			Format:  tar.FormatPAX,
		}
		if f.Dir {
			h.Typeflag, h.Name = tar.TypeDir, f.Path+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.Content))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if !f.Dir {
			if _, err := tw.Write(f.Content); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Layer is LayerTar gzip-compressed (no name or time in the gzip header) as an OCI layer.
func Layer(files []File, mtime time.Time) (v1.Layer, error) {
	raw, err := LayerTar(files, mtime)
	if err != nil {
		return nil, err
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(raw); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	b := gz.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
