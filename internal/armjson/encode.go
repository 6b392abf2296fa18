package armjson

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
)

// Marshal encodes v (a model, or a pointer to one) as the SDK's MarshalJSON would, byte for
// byte: keys sorted, nil fields left out, HTML characters escaped.
func (c *Codec) Marshal(v any) ([]byte, error) {
	return c.Append(nil, v)
}

// Append is Marshal appending to buf.
func (c *Codec) Append(buf []byte, v any) ([]byte, error) {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() {
		return append(buf, "null"...), nil
	}
	// Start with room for the last document of this type: growing a buffer to a megabyte
	// appends the same bytes several times over.
	t := rv.Type()
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var si *structInfo
	if t.Kind() == reflect.Struct {
		si = c.info(t)
		if hint := int(si.lastSize.Load()); cap(buf)-len(buf) < hint {
			buf = append(make([]byte, 0, len(buf)+hint+hint/8), buf...)
		}
	}
	start := len(buf)
	out, err := c.encode(buf, rv)
	if err == nil && si != nil {
		si.lastSize.Store(int64(len(out) - start))
	}
	return out, err
}

func (c *Codec) encode(b []byte, v reflect.Value) ([]byte, error) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return append(b, "null"...), nil
		}
		return c.encode(b, v.Elem())
	case reflect.Struct:
		si := c.info(v.Type())
		if si.delegated {
			return appendMarshaled(b, v)
		}
		return c.encodeStruct(b, v, si)
	case reflect.String:
		return appendString(b, v.String()), nil
	case reflect.Bool:
		return strconv.AppendBool(b, v.Bool()), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.AppendInt(b, v.Int(), 10), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.AppendUint(b, v.Uint(), 10), nil
	case reflect.Float32, reflect.Float64:
		return appendFloat(b, v.Float(), v.Type().Bits())
	case reflect.Slice:
		if v.IsNil() {
			return append(b, "null"...), nil
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return appendMarshaled(b, v)
		}
		b = append(b, '[')
		for i := range v.Len() {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = c.encode(b, v.Index(i)); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case reflect.Map:
		if v.IsNil() {
			return append(b, "null"...), nil
		}
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(appendString(b, k.String()), ':')
			var err error
			if b, err = c.encode(b, v.MapIndex(k)); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case reflect.Interface:
		if v.IsNil() {
			return append(b, "null"...), nil
		}
		return appendMarshaled(b, v.Elem())
	}
	return nil, fmt.Errorf("armjson: cannot encode %s", v.Type())
}

// encodeStruct writes the fields that are set, in the order of their names, as the SDK's map
// does. A field holding azcore's null sentinel is written as null, as the SDK's populate does.
func (c *Codec) encodeStruct(b []byte, v reflect.Value, si *structInfo) ([]byte, error) {
	b = append(b, '{')
	first := true
	for i := range si.fields {
		f := &si.fields[i]
		fv := v.Field(f.index)
		if fv.IsNil() {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, f.key...)
		if isNullSentinel(fv) {
			b = append(b, "null"...)
			continue
		}
		var err error
		if b, err = c.encode(b, fv); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// isNullSentinel reports azcore.NullValue's sentinel, which asks ARM to clear a property. Only a
// pointer, slice or map field can hold one.
func isNullSentinel(v reflect.Value) bool {
	return azcore.IsNullValue(v.Interface())
}

// appendMarshaled appends what encoding/json writes for v (its own MarshalJSON, for delegated
// types), compacted and HTML-escaped as json.Marshal does.
func appendMarshaled(b []byte, v reflect.Value) ([]byte, error) {
	out, err := json.Marshal(v.Interface())
	if err != nil {
		return nil, err
	}
	return append(b, out...), nil
}

// appendFloat formats as encoding/json does: ES6 number formatting, exponent without padding.
func appendFloat(b []byte, f float64, bits int) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("armjson: unsupported value %s", strconv.FormatFloat(f, 'g', -1, bits))
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	b = strconv.AppendFloat(b, f, format, -1, bits)
	if format == 'e' {
		// e-09 → e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

const hexDigits = "0123456789abcdef"

// appendString quotes s as encoding/json does with HTML escaping (its default): <, > and & as
// \u00XX, control characters escaped, invalid UTF-8 as U+FFFD, U+2028 and U+2029 escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
