// Package sources decides which of azure.json's sources make the configuration — the
// --cloud-config file, the Secret, or the Secret's keys merged over the file — as the file's
// cloudConfigType says, and merges them. It reads nothing: internal/cloudconfig reads the file
// and the Secret and hands their bytes here.
package sources

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/azure-ccm/azure-ccm/internal/config"
)

// Values of cloudConfigType.
const (
	TypeFile   = "file"
	TypeSecret = "secret"
	TypeMerge  = "merge"
)

// Input is what the sources held at one moment, for Resolve.
type Input struct {
	File       []byte
	HasFile    bool
	Secret     []byte
	HasSecret  bool
	SecretName string // namespace/name, for messages
	SecretKey  string // the key of the Secret's data holding azure.json, for messages
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
			return nil, TypeSecret, false, fmt.Errorf("no --cloud-config file, and Secret %s (key %s) does not exist", in.SecretName, in.SecretKey)
		}
		return in.Secret, TypeSecret, true, nil
	}
	typ, err = Effective(in.File)
	if err != nil {
		return nil, "", false, err
	}
	switch typ {
	case TypeFile:
		return in.File, typ, false, nil
	case TypeSecret:
		if !in.HasSecret {
			return nil, typ, false, fmt.Errorf("cloudConfigType: %q needs Secret %s (key %s), which does not exist", typ, in.SecretName, in.SecretKey)
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

// Declared reads cloudConfigType from a document ("" when absent). Any other value than
// file, secret or merge is an error naming the key. The document may hold nothing else (secret
// mode), so it is decoded without validation.
func Declared(doc []byte) (string, error) {
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

// Effective is the file's cloudConfigType, file when it sets none.
func Effective(file []byte) (string, error) {
	t, err := Declared(file)
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
