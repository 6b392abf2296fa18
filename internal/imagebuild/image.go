package imagebuild

import (
	"fmt"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Meta describes what an image was built from; it becomes the OCI labels of every platform's
// image and the annotations of the index.
type Meta struct {
	Source   string    // repository URL
	Revision string    // commit
	Version  string    // the binaries' version
	Created  time.Time // SOURCE_DATE_EPOCH: also every file's mtime
}

// Labels are the org.opencontainers.image.* labels for m.
func (m Meta) Labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.source":   m.Source,
		"org.opencontainers.image.revision": m.Revision,
		"org.opencontainers.image.version":  m.Version,
		"org.opencontainers.image.created":  m.Created.UTC().Format(time.RFC3339),
	}
}

// Binary is one platform's build of a command.
type Binary struct {
	Name     string // command name: the file is /Name and the entrypoint
	OS, Arch string
	Content  []byte
}

// Image is bin on the base layer: entrypoint /NAME, run as NonRoot, labelled with m.
func Image(bin Binary, m Meta) (v1.Image, error) {
	base, err := Layer(BaseFiles(), m.Created)
	if err != nil {
		return nil, fmt.Errorf("base layer: %w", err)
	}
	binLayer, err := Layer([]File{BinaryFile(bin.Name, bin.Content)}, m.Created)
	if err != nil {
		return nil, fmt.Errorf("%s layer: %w", bin.Name, err)
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	created := v1.Time{Time: m.Created.UTC()}
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: created, CreatedBy: "azure-ccm base: passwd, group, /tmp"}},
		mutate.Addendum{Layer: binLayer, History: v1.History{Created: created, CreatedBy: "azure-ccm binary /" + bin.Name}},
	)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = bin.OS, bin.Arch
	cf.Created = created
	user := strconv.Itoa(NonRoot) + ":" + strconv.Itoa(NonRoot)
	cf.Config = v1.Config{
		Entrypoint: []string{"/" + bin.Name},
		User:       user,
		WorkingDir: "/",
		Env:        []string{"PATH=/", "HOME=/home/nonroot"},
		Labels:     m.Labels(),
	}
	return mutate.ConfigFile(img, cf)
}

// Index is the multi-arch index of imgs (one per platform, in the given order), annotated with
// m's labels.
func Index(imgs []v1.Image, m Meta) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	adds := make([]mutate.IndexAddendum, 0, len(imgs))
	for _, img := range imgs {
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: cf.OS, Architecture: cf.Architecture}},
		})
	}
	idx = mutate.AppendManifests(idx, adds...)
	return mutate.Annotations(idx, m.Labels()).(v1.ImageIndex), nil
}
