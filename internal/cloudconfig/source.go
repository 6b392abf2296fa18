// Package cloudconfig reads azure.json from its sources — the --cloud-config file, the Secret
// (kube-system/azure-cloud-provider, key cloud-config) or both merged, as cloudConfigType says;
// the file alone when it says nothing — and, with dynamic reloading, watches them and hands
// every valid change to the caller.
package cloudconfig

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/cloudconfig/sources"
	"github.com/azure-ccm/azure-ccm/internal/config"
)

// Defaults of the existing provider's flags.
const (
	DefaultSecretName      = "azure-cloud-provider" //nolint:gosec // G101: a Secret's name, not a credential
	DefaultSecretNamespace = "kube-system"
	// SecretKey is the key of the Secret's data holding azure.json.
	SecretKey = "cloud-config" //nolint:gosec // G101: a key of the Secret's data, not a credential
)

// Source names where azure.json comes from.
type Source struct {
	// File is --cloud-config ("" for none: the Secret is then the only source).
	File string
	// Namespace and Name of the Secret, and Key of its data holding azure.json (default
	// SecretKey).
	Namespace, Name, Key string
	// Kube reads the Secret (nil: the file only).
	Kube kubernetes.Interface
	// Getenv supplies the environment overrides (nil: none).
	Getenv func(string) string
}

// Loaded is one reading of the sources.
type Loaded struct {
	// Data is the effective azure.json (the merged document in merge mode).
	Data []byte
	// Config is Data parsed, defaulted and validated.
	Config *config.Config
	// Type is the effective cloudConfigType that chose the sources: file when the file does
	// not set it (TypeSet false), secret when there is no file.
	Type string
	// TypeSet says the file sets cloudConfigType.
	TypeSet bool
	// Secret is the Secret read (nil when it was not consulted or does not exist).
	Secret *v1.Secret
	// Origin says which sources Data came from, for logs ("file /etc/azure.json", "secret
	// kube-system/azure-cloud-provider", or both).
	Origin string
	// SecretNote says, for the log, why the Secret was or was not read and used.
	SecretNote string
}

// Load reads the sources now and parses the result.
func (s Source) Load(ctx context.Context) (Loaded, error) {
	in := sources.Input{SecretName: s.Namespace + "/" + s.Name, SecretKey: s.key()}
	if s.File != "" {
		b, err := readFile(s.File)
		if err != nil {
			return Loaded{}, fmt.Errorf("reading cloud config: %w", err)
		}
		in.File, in.HasFile = b, true
	}
	// The file alone decides whether the Secret matters: do not read it when it does not.
	needSecret := !in.HasFile
	typeSet := false
	if in.HasFile {
		if t, err := sources.Declared(in.File); err == nil {
			needSecret, typeSet = t == sources.TypeSecret || t == sources.TypeMerge, t != ""
		}
	}
	var secret *v1.Secret
	forbidden := false
	if needSecret && s.Kube != nil {
		sec, err := s.Kube.CoreV1().Secrets(s.Namespace).Get(withoutBodyLogs(ctx), s.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case apierrors.IsForbidden(err) && in.HasFile && mergeMode(in.File):
			// A deployment without read access to the Secret keeps working on its file, as
			// before the Secret was a source; secret mode (or no file) cannot.
			klog.ErrorS(err, "The cloud config Secret cannot be read; using the file alone", "secret", in.SecretName)
			forbidden = true
		case err != nil:
			return Loaded{}, fmt.Errorf("reading Secret %s: %w", in.SecretName, err)
		default:
			secret = sec
			d, ok := sec.Data[s.key()]
			if !ok {
				return Loaded{Secret: sec}, fmt.Errorf("secret %s has no key %s (keys: %s)", in.SecretName, s.key(), strings.Join(dataKeys(sec), ", "))
			}
			in.Secret, in.HasSecret = d, true
		}
	}
	data, typ, usedSecret, err := sources.Resolve(in)
	l := Loaded{Data: data, Type: typ, TypeSet: typeSet}
	if usedSecret || secret != nil {
		l.Secret = secret
	}
	if err != nil {
		return l, err
	}
	var origin []string
	if in.HasFile && typ != sources.TypeSecret {
		origin = append(origin, "file "+s.File)
	}
	if usedSecret {
		origin = append(origin, "secret "+in.SecretName)
	}
	l.Origin = strings.Join(origin, " + ")
	l.SecretNote = secretNote(in, typ, typeSet, usedSecret, forbidden)
	cfg, err := config.Parse(data, s.Getenv)
	if err != nil {
		return l, fmt.Errorf("invalid cloud config (%s): %w", l.Origin, err)
	}
	l.Config = cfg
	return l, nil
}

// secretNote says why the Secret was or was not used.
func secretNote(in sources.Input, typ string, typeSet, used, forbidden bool) string {
	switch {
	case !in.HasFile:
		return "the only source: no --cloud-config file"
	case typ == sources.TypeFile && !typeSet:
		return "not read: the file sets no cloudConfigType (merge or secret reads the Secret)"
	case typ == sources.TypeFile:
		return "not read: cloudConfigType is file"
	case typ == sources.TypeSecret:
		return "the only source: cloudConfigType is secret"
	case used:
		return "merged over the file: cloudConfigType is merge"
	case forbidden:
		return "cannot be read (forbidden): cloudConfigType is merge, the file is used alone"
	}
	return "does not exist: cloudConfigType is merge, the file is used alone"
}

// readFile reads the file up to config.MaxFileSize: a wrong file (a log, an image) is refused
// before it is decoded, whose memory is many times the input's.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := config.ReadLimited(f, config.MaxFileSize)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

func mergeMode(file []byte) bool {
	t, err := sources.Effective(file)
	return err == nil && t == sources.TypeMerge
}

func (s Source) key() string {
	if s.Key == "" {
		return SecretKey
	}
	return s.Key
}

func dataKeys(s *v1.Secret) []string {
	var keys []string
	for k := range s.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
