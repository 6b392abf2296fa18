package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// Decode reads an azure.json document (JSON or YAML) into into, refusing a key set twice in one
// object. A document that starts with { or [ is JSON and is read by encoding/json, so that a
// syntax or type error names its line, column and key, and tab indentation (which YAML refuses)
// is accepted. JSON that encoding/json refuses but YAML reads (a trailing comma, which the
// existing provider's YAML decoder accepts) is still accepted; anything else is read as YAML
// with sigs.k8s.io/yaml, as the existing provider does.
//
// Duplicates are checked against the shape of Config: keys naming struct fields are compared
// case-insensitively (encoding/json matches them so, and the later one would silently win),
// keys of maps such as tagsMap or matchLabels exactly.
func Decode(data []byte, into any) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil
	}
	if trimmed[0] != '{' && trimmed[0] != '[' {
		return decodeYAML(data, into)
	}
	if err := jsonDuplicates(data); err != nil {
		return err
	}
	jerr := json.Unmarshal(data, into)
	if jerr == nil {
		return nil
	}
	var syn *json.SyntaxError
	if errors.As(jerr, &syn) || errors.Is(jerr, io.ErrUnexpectedEOF) {
		yerr := decodeYAML(data, into)
		if yerr == nil {
			return nil
		}
		var dup *DuplicateKeyError
		if errors.As(yerr, &dup) {
			return yerr
		}
	}
	return describeJSONError(data, jerr)
}

func decodeYAML(data []byte, into any) error {
	if err := yamlDuplicates(data); err != nil {
		return err
	}
	return yaml.Unmarshal(data, into)
}

// DuplicateKeyError is a key set twice in one object of azure.json.
type DuplicateKeyError struct {
	// Path is the dotted path of the object holding the key ("" at the top level).
	Path string
	// Key and First are the second and the first spelling of the key.
	Key, First string
	// Line and Column locate the second key, FirstLine and FirstColumn the first (1-based).
	Line, Column, FirstLine, FirstColumn int
}

func (e *DuplicateKeyError) Error() string {
	name := Quote(e.Key)
	if e.Path != "" {
		// A path joins several keys: it may be longer than one value before it is too long.
		name += " in " + quoteUpTo(e.Path, 4*maxShownValue)
	}
	if e.Key == e.First {
		return fmt.Sprintf("duplicate key %s at line %d, column %d (first set at line %d, column %d)",
			name, e.Line, e.Column, e.FirstLine, e.FirstColumn)
	}
	return fmt.Sprintf("duplicate key %s at line %d, column %d: the same key as %s at line %d, column %d (keys are case-insensitive)",
		name, e.Line, e.Column, Quote(e.First), e.FirstLine, e.FirstColumn)
}

// shape follows the Go type a part of the document decodes into, to tell struct fields (whose
// keys are case-insensitive) from map keys (exact). A nil shape compares exactly.
type shape struct{ t reflect.Type }

var configShape = shape{reflect.TypeOf(Config{})}

func (s shape) deref() reflect.Type {
	t := s.t
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func (s shape) foldsKeys() bool {
	t := s.deref()
	return t != nil && t.Kind() == reflect.Struct
}

// field is the shape of the value of key in an object of this shape.
func (s shape) field(key string) shape {
	t := s.deref()
	if t == nil {
		return shape{}
	}
	switch t.Kind() {
	case reflect.Map:
		return shape{t.Elem()}
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			if name == "" {
				name = t.Field(i).Name
			}
			if strings.EqualFold(name, key) {
				return shape{t.Field(i).Type}
			}
		}
	}
	return shape{}
}

// elem is the shape of an element of a list of this shape.
func (s shape) elem() shape {
	t := s.deref()
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		return shape{t.Elem()}
	}
	return shape{}
}

// seenKeys records the keys of one object and reports the first repeat.
type seenKeys struct {
	fold  bool
	first map[string]*DuplicateKeyError
}

func newSeenKeys(fold bool) *seenKeys {
	return &seenKeys{fold: fold, first: map[string]*DuplicateKeyError{}}
}

func (s *seenKeys) add(path, key string, line, col int) error {
	k := key
	if s.fold {
		k = strings.ToLower(key)
	}
	if f, ok := s.first[k]; ok {
		return &DuplicateKeyError{Path: path, Key: key, First: f.Key, Line: line, Column: col, FirstLine: f.Line, FirstColumn: f.Column}
	}
	s.first[k] = &DuplicateKeyError{Key: key, Line: line, Column: col}
	return nil
}

// jsonDuplicates walks the JSON tokens of data and reports the first key repeated in one object.
// A syntax error ends the walk silently: decoding reports it with its position.
func jsonDuplicates(data []byte) error {
	w := newJSONWalker(data)
	for {
		before := w.offset()
		tok, isKey, err := w.step()
		if err != nil {
			return nil //nolint:nilerr // end of input, or a syntax error that decoding reports with its position
		}
		if !isKey {
			continue
		}
		top := w.top()
		if top.seen == nil {
			top.seen = newSeenKeys(top.shape.foldsKeys())
		}
		line, col := lineCol(data, keyStart(data, before)+1)
		if err := top.seen.add(top.path, tok.(string), line, col); err != nil {
			return err
		}
	}
}

// keyStart is the offset of the opening quote of the key whose token begins after offset: the
// decoder has not yet consumed the separating comma and whitespace.
func keyStart(data []byte, offset int64) int64 {
	for offset < int64(len(data)) && bytes.IndexByte([]byte(" \t\r\n,"), data[offset]) >= 0 {
		offset++
	}
	return offset
}

// yamlDuplicates reports the first key repeated in one mapping of a YAML document. A document
// this parser refuses is left to sigs.k8s.io/yaml, which decides and reports it.
func yamlDuplicates(data []byte) error {
	var root yamlv3.Node
	if err := yamlv3.Unmarshal(data, &root); err != nil {
		return nil //nolint:nilerr // sigs.k8s.io/yaml decides and reports it
	}
	return yamlNodeDuplicates(&root, configShape, "", 0)
}

// maxYAMLDepth bounds the walk: aliases can make a small document a deep graph.
const maxYAMLDepth = 64

func yamlNodeDuplicates(n *yamlv3.Node, sh shape, path string, depth int) error {
	if n == nil || depth > maxYAMLDepth {
		return nil
	}
	switch n.Kind {
	case yamlv3.DocumentNode:
		for _, c := range n.Content {
			if err := yamlNodeDuplicates(c, sh, path, depth+1); err != nil {
				return err
			}
		}
	case yamlv3.SequenceNode:
		for i, c := range n.Content {
			if err := yamlNodeDuplicates(c, sh.elem(), fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
				return err
			}
		}
	case yamlv3.MappingNode:
		seen := newSeenKeys(sh.foldsKeys())
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yamlv3.ScalarNode {
				continue // a merge key or a complex key: sigs.k8s.io/yaml decides
			}
			if k.Tag == "!!merge" {
				continue
			}
			if err := seen.add(path, k.Value, k.Line, k.Column); err != nil {
				return err
			}
			if err := yamlNodeDuplicates(v, sh.field(k.Value), joinPath(path, k.Value), depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}
