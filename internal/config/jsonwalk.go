package config

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// jsonFrame is a container open around a jsonWalker's position.
type jsonFrame struct {
	object bool
	// path is the container's own dotted path ("" for the document), shape the Go type it
	// decodes into.
	path  string
	shape shape
	// key is the object's last key read; expectKey says the next string token is a key.
	key       string
	expectKey bool
	// index is the list element being read.
	index int
	// seen is the object's keys, kept by the duplicate check.
	seen *seenKeys
}

// jsonWalker follows a JSON document token by token and keeps the containers open around its
// position, so that a key or an offset can be named by its dotted path.
type jsonWalker struct {
	dec   *json.Decoder
	stack []jsonFrame
}

func newJSONWalker(data []byte) *jsonWalker {
	return &jsonWalker{dec: json.NewDecoder(bytes.NewReader(data))}
}

// offset is the byte offset after the last token read.
func (w *jsonWalker) offset() int64 { return w.dec.InputOffset() }

// top is the innermost open container, nil at the top level.
func (w *jsonWalker) top() *jsonFrame {
	if len(w.stack) == 0 {
		return nil
	}
	return &w.stack[len(w.stack)-1]
}

// path is the dotted path of the value at the walker's position: the innermost object's last
// key, or the innermost list's element.
func (w *jsonWalker) path() string {
	_, p := w.child()
	return p
}

// child is the shape and path of the value about to be read in the innermost container.
func (w *jsonWalker) child() (shape, string) {
	top := w.top()
	switch {
	case top == nil:
		return configShape, ""
	case top.object:
		return top.shape.field(top.key), joinPath(top.path, top.key)
	default:
		return top.shape.elem(), fmt.Sprintf("%s[%d]", top.path, top.index)
	}
}

// step reads one token and moves the position past it. isKey says the token was an object's
// key (it is then the innermost object's key). err is the decoder's: io.EOF at the end, or a
// syntax error.
func (w *jsonWalker) step() (tok json.Token, isKey bool, err error) {
	tok, err = w.dec.Token()
	if err != nil {
		return nil, false, err
	}
	if top := w.top(); top != nil && top.object && top.expectKey {
		if key, ok := tok.(string); ok {
			top.key, top.expectKey = key, false
			return tok, true, nil
		}
	}
	switch tok {
	case json.Delim('{'):
		sh, p := w.child()
		w.stack = append(w.stack, jsonFrame{object: true, shape: sh, path: p, expectKey: true})
	case json.Delim('['):
		sh, p := w.child()
		w.stack = append(w.stack, jsonFrame{shape: sh, path: p})
	case json.Delim('}'), json.Delim(']'):
		if len(w.stack) > 0 {
			w.stack = w.stack[:len(w.stack)-1]
		}
		w.valueDone()
	default:
		w.valueDone()
	}
	return tok, false, nil
}

// valueDone records that a value ended inside the innermost container.
func (w *jsonWalker) valueDone() {
	if top := w.top(); top != nil {
		if top.object {
			top.expectKey = true
		} else {
			top.index++
		}
	}
}

func joinPath(path, key string) string {
	if path == "" || key == "" {
		return path + key
	}
	return path + "." + key
}
