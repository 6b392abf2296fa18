package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// readFileLimited reads at most limit bytes of path and fails if the file is larger, so that a
// wrong file (a log, a disk image) cannot exhaust memory.
func readFileLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadLimited(f, limit)
}

// ReadLimited reads r to its end and fails if it holds more than limit bytes.
func ReadLimited(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("larger than the limit of %d bytes", limit)
	}
	return data, nil
}

// describeJSONError turns encoding/json's errors into messages naming the line, column and the
// key being decoded, so that a stray comma in azure.json is found without counting bytes.
func describeJSONError(data []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		line, col := lineCol(data, syn.Offset)
		where := fmt.Sprintf("line %d, column %d (byte %d)", line, col, syn.Offset)
		if key := keyAt(data, syn.Offset); key != "" {
			where += " near key " + Quote(key)
		}
		return fmt.Errorf("JSON syntax error at %s: %s", where, syn.Error())
	case errors.As(err, &typ):
		line, col := lineCol(data, typ.Offset)
		key := typ.Field
		if key == "" {
			key = keyAt(data, typ.Offset)
		}
		if key == "" {
			return fmt.Errorf("the document is a JSON %s, not an object", typ.Value)
		}
		return fmt.Errorf("key %s: a JSON %s where %s is expected (line %d, column %d)", Quote(key), typ.Value, goTypeName(typ), line, col)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("JSON ends early (an object or string is not closed)")
	}
	return err
}

func goTypeName(e *json.UnmarshalTypeError) string {
	if e.Type == nil {
		return "another type"
	}
	switch e.Type.Kind().String() {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	case "float32", "float64":
		return "a number"
	case "slice", "array":
		return "a list"
	case "map", "struct", "ptr":
		return "an object"
	}
	return e.Type.String()
}

// lineCol converts a byte offset (1-based, as encoding/json reports the byte after the
// problem) into a 1-based line and column.
func lineCol(data []byte, offset int64) (line, col int) {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	if offset < 1 {
		offset = 1
	}
	before := data[:offset-1]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(offset-1) - bytes.LastIndexByte(before, '\n')
	return line, col
}

// keyAt returns the dotted path of the key whose value was being read at offset ("" at the top
// level), following the tokens up to it.
func keyAt(data []byte, offset int64) string {
	w := newJSONWalker(data)
	for w.offset() < offset-1 {
		if _, _, err := w.step(); err != nil {
			break
		}
	}
	return w.path()
}
