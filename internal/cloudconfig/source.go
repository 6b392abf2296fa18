// Package cloudconfig reads azure.json from its sources — the --cloud-config file, the Secret
// (kube-system/azure-cloud-provider, key cloud-config) or both merged, as cloudConfigType says;
// the file alone when it says nothing — and, with dynamic reloading, watches them and hands
// every valid change to the caller.
package cloudconfig

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/config"
)

// Defaults of the existing provider's flags.
const (
	DefaultSecretName      = "azure-cloud-provider" //nolint:gosec // G101: a Secret's name, not a credential
	DefaultSecretNamespace = "kube-system"
	// SecretKey is the key of the Secret's data holding azure.json.
	SecretKey = "cloud-config" //nolint:gosec // G101: a key of the Secret's data, not a credential
)

// Values of cloudConfigType.
const (
	TypeFile   = "file"
	TypeSecret = "secret"
	TypeMerge  = "merge"
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

// Input is what the sources held at one moment, for Resolve.
type Input struct {
	File       []byte
	HasFile    bool
	Secret     []byte
	HasSecret  bool
	SecretName string // namespace/name, for messages
}

// Resolve picks and merges the sources. With a file, its cloudConfigType decides: not set or
// file, the file only (the existing provider reads nothing else when given --cloud-config, so a
// leftover Secret must not change the configuration); secret, the Secret only; merge, the file
// with every top-level key the Secret sets replacing the file's (keys compared
// case-insensitively). Without a file the Secret is the only source. A Secret that
// cloudConfigType needs and that does not exist is an error; in merge mode a missing Secret
// leaves the file alone. typ is the effective type (file when the file does not set one).
func Resolve(in Input) (data []byte, typ string, usedSecret bool, err error) {
	if !in.HasFile {
		if !in.HasSecret {
			return nil, TypeSecret, false, fmt.Errorf("no --cloud-config file, and Secret %s (key %s) does not exist", in.SecretName, SecretKey)
		}
		return in.Secret, TypeSecret, true, nil
	}
	typ, err = effectiveType(in.File)
	if err != nil {
		return nil, "", false, err
	}
	switch typ {
	case TypeFile:
		return in.File, typ, false, nil
	case TypeSecret:
		if !in.HasSecret {
			return nil, typ, false, fmt.Errorf("cloudConfigType: %q needs Secret %s (key %s), which does not exist", typ, in.SecretName, SecretKey)
		}
		return in.Secret, typ, true, nil
	default: // merge
		if !in.HasSecret {
			return in.File, typ, false, nil
		}
		merged, err := Merge(in.File, in.Secret)
		if err != nil {
			return nil, typ, true, err
		}
		return merged, typ, true, nil
	}
}

// declaredType reads cloudConfigType from a document ("" when absent). Any other value than
// file, secret or merge is an error naming the key. The document may hold nothing else (secret
// mode), so it is decoded without validation.
func declaredType(doc []byte) (string, error) {
	var c config.Config
	if len(bytes.TrimSpace(doc)) > 0 {
		if err := config.Decode(doc, &c); err != nil {
			return "", fmt.Errorf("decoding the file: %w", err)
		}
	}
	typ := strings.ToLower(c.CloudConfigType)
	switch typ {
	case "", TypeFile, TypeSecret, TypeMerge:
		return typ, nil
	}
	return "", fmt.Errorf("cloudConfigType: %q is not one of file, secret, merge", c.CloudConfigType)
}

// effectiveType is the file's cloudConfigType, file when it sets none.
func effectiveType(file []byte) (string, error) {
	t, err := declaredType(file)
	if t == "" && err == nil {
		t = TypeFile
	}
	return t, err
}

// Merge returns base with every top-level key of over replacing base's key of the same name
// (compared case-insensitively, as azure.json keys are), as JSON.
func Merge(base, over []byte) ([]byte, error) {
	b, err := topLevel(base, "the file")
	if err != nil {
		return nil, err
	}
	o, err := topLevel(over, "the Secret")
	if err != nil {
		return nil, err
	}
	for k, v := range o {
		for bk := range b {
			if strings.EqualFold(bk, k) {
				delete(b, bk)
			}
		}
		b[k] = v
	}
	return json.Marshal(b)
}

func topLevel(doc []byte, what string) (map[string]json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(doc)) == 0 {
		return m, nil
	}
	if err := config.Decode(doc, &m); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", what, err)
	}
	return m, nil
}

// Load reads the sources now and parses the result.
func (s Source) Load(ctx context.Context) (Loaded, error) {
	in := Input{SecretName: s.Namespace + "/" + s.Name}
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
		if t, err := declaredType(in.File); err == nil {
			needSecret, typeSet = t == TypeSecret || t == TypeMerge, t != ""
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
	data, typ, usedSecret, err := Resolve(in)
	l := Loaded{Data: data, Type: typ, TypeSet: typeSet}
	if usedSecret || secret != nil {
		l.Secret = secret
	}
	if err != nil {
		return l, err
	}
	var origin []string
	if in.HasFile && typ != TypeSecret {
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
func secretNote(in Input, typ string, typeSet, used, forbidden bool) string {
	switch {
	case !in.HasFile:
		return "the only source: no --cloud-config file"
	case typ == TypeFile && !typeSet:
		return "not read: the file sets no cloudConfigType (merge or secret reads the Secret)"
	case typ == TypeFile:
		return "not read: cloudConfigType is file"
	case typ == TypeSecret:
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
	t, err := effectiveType(file)
	return err == nil && t == TypeMerge
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
