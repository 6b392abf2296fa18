package armjson

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Unmarshal decodes data into v (a pointer to a model) as the SDK's UnmarshalJSON would: keys
// matched exactly, unknown keys ignored, null leaving a field unset. Unlike the SDK it reads
// an object's keys in order, so of two equal keys the later wins for valid values but an
// invalid earlier one is an error (the SDK's map keeps only the last). ARM never repeats one.
func (c *Codec) Unmarshal(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("armjson: Unmarshal needs a non-nil pointer, got %T", v)
	}
	d := decoder{c: c, data: data}
	if err := d.value(rv.Elem()); err != nil {
		return err
	}
	d.skipSpace()
	if d.pos != len(d.data) {
		return d.errorf("data after the top-level value")
	}
	return nil
}

type decoder struct {
	c    *Codec
	data []byte
	pos  int
	// depth guards against stack exhaustion on hostile input, as encoding/json does.
	depth int
}

const maxDepth = 10000

func (d *decoder) errorf(format string, args ...any) error {
	return fmt.Errorf("armjson: offset %d: %s", d.pos, fmt.Sprintf(format, args...))
}

func (d *decoder) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// peek returns the next non-space byte (0 at the end).
func (d *decoder) peek() byte {
	d.skipSpace()
	if d.pos >= len(d.data) {
		return 0
	}
	return d.data[d.pos]
}

func (d *decoder) literal(word string) bool {
	if len(d.data)-d.pos >= len(word) && string(d.data[d.pos:d.pos+len(word)]) == word {
		d.pos += len(word)
		return true
	}
	return false
}

// value decodes the next value into v (settable).
func (d *decoder) value(v reflect.Value) error {
	c := d.peek()
	if c == 'n' {
		if !d.literal("null") {
			return d.errorf("invalid literal")
		}
		// null leaves a field as it is (the SDK skips it); in an array it is a nil element.
		switch v.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
			v.SetZero()
		}
		return nil
	}
	switch v.Kind() {
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		if err := d.value(p.Elem()); err != nil {
			return err
		}
		v.Set(p)
		return nil
	case reflect.Struct:
		si := d.c.info(v.Type())
		if si.delegated {
			return d.delegated(v.Addr())
		}
		return d.object(v, si)
	case reflect.String:
		if c != '"' {
			return d.mismatch(v)
		}
		s, err := d.str()
		if err != nil {
			return err
		}
		v.SetString(s)
		return nil
	case reflect.Bool:
		switch {
		case d.literal("true"):
			v.SetBool(true)
		case d.literal("false"):
			v.SetBool(false)
		default:
			return d.mismatch(v)
		}
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		num, err := d.number(v)
		if err != nil {
			return err
		}
		n, err := strconv.ParseInt(num, 10, v.Type().Bits())
		if err != nil {
			return d.errorf("number %s does not fit %s", num, v.Type())
		}
		v.SetInt(n)
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		num, err := d.number(v)
		if err != nil {
			return err
		}
		n, err := strconv.ParseUint(num, 10, v.Type().Bits())
		if err != nil {
			return d.errorf("number %s does not fit %s", num, v.Type())
		}
		v.SetUint(n)
		return nil
	case reflect.Float32, reflect.Float64:
		num, err := d.number(v)
		if err != nil {
			return err
		}
		f, err := strconv.ParseFloat(num, v.Type().Bits())
		if err != nil {
			return d.errorf("number %s does not fit %s", num, v.Type())
		}
		v.SetFloat(f)
		return nil
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return d.delegated(v.Addr())
		}
		return d.array(v)
	case reflect.Map:
		return d.object(v, nil)
	case reflect.Interface:
		return d.delegated(v.Addr())
	}
	return d.errorf("cannot decode into %s", v.Type())
}

func (d *decoder) mismatch(v reflect.Value) error {
	return d.errorf("cannot decode %q into %s", kindOf(d.peek()), v.Type())
}

func kindOf(c byte) string {
	switch {
	case c == '"':
		return "string"
	case c == '{':
		return "object"
	case c == '[':
		return "array"
	case c == 't' || c == 'f':
		return "bool"
	case c == '-' || c >= '0' && c <= '9':
		return "number"
	case c == 0:
		return "end of input"
	}
	return "invalid character"
}

// delegated decodes the next value with encoding/json into p (a pointer): the type's own
// UnmarshalJSON, or encoding/json's rules for interfaces and byte slices.
func (d *decoder) delegated(p reflect.Value) error {
	start := d.pos
	if err := d.skipValue(); err != nil {
		return err
	}
	if err := json.Unmarshal(d.data[start:d.pos], p.Interface()); err != nil {
		return fmt.Errorf("armjson: offset %d: %w", start, err)
	}
	return nil
}

// object decodes a JSON object into a model struct (si set) or a map (si nil).
func (d *decoder) object(v reflect.Value, si *structInfo) error {
	if d.peek() != '{' {
		return d.mismatch(v)
	}
	if d.depth++; d.depth > maxDepth {
		return d.errorf("nested too deeply")
	}
	defer func() { d.depth-- }()
	d.pos++
	isMap := si == nil
	if isMap && v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	if d.peek() == '}' {
		d.pos++
		return nil
	}
	for {
		if d.peek() != '"' {
			return d.errorf("object key expected")
		}
		key, escaped, err := d.rawStr()
		if err != nil {
			return err
		}
		if d.peek() != ':' {
			return d.errorf("':' expected after object key")
		}
		d.pos++
		if isMap {
			k := d.keyString(key, escaped)
			ev := reflect.New(v.Type().Elem()).Elem()
			if err := d.value(ev); err != nil {
				return err
			}
			v.SetMapIndex(reflect.ValueOf(k).Convert(v.Type().Key()), ev)
		} else {
			var i int
			var ok bool
			if escaped {
				i, ok = si.byName[d.keyString(key, true)]
			} else {
				i, ok = si.byName[string(key)] // no allocation: map lookup of a converted []byte
			}
			if ok {
				if err := d.value(v.Field(si.fields[i].index)); err != nil {
					return err
				}
			} else if err := d.skipValue(); err != nil {
				return err
			}
		}
		switch d.peek() {
		case ',':
			d.pos++
		case '}':
			d.pos++
			return nil
		default:
			return d.errorf("',' or '}' expected in object")
		}
	}
}

func (d *decoder) array(v reflect.Value) error {
	if d.peek() != '[' {
		return d.mismatch(v)
	}
	if d.depth++; d.depth > maxDepth {
		return d.errorf("nested too deeply")
	}
	defer func() { d.depth-- }()
	d.pos++
	s := reflect.MakeSlice(v.Type(), 0, 0)
	if d.peek() == ']' {
		d.pos++
		v.Set(s)
		return nil
	}
	for {
		n := s.Len()
		if n == s.Cap() {
			grown := reflect.MakeSlice(v.Type(), n, max(4, 2*n))
			reflect.Copy(grown, s)
			s = grown
		}
		s = s.Slice(0, n+1)
		if err := d.value(s.Index(n)); err != nil {
			return err
		}
		switch d.peek() {
		case ',':
			d.pos++
		case ']':
			d.pos++
			v.Set(s)
			return nil
		default:
			return d.errorf("',' or ']' expected in array")
		}
	}
}

// number returns the text of the next JSON number (grammar checked).
func (d *decoder) number(v reflect.Value) (string, error) {
	c := d.peek()
	if c != '-' && (c < '0' || c > '9') {
		return "", d.mismatch(v)
	}
	start := d.pos
	if err := d.skipNumber(); err != nil {
		return "", err
	}
	return string(d.data[start:d.pos]), nil
}

func (d *decoder) skipNumber() error {
	digits := func() int {
		n := 0
		for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
			d.pos++
			n++
		}
		return n
	}
	if d.pos < len(d.data) && d.data[d.pos] == '-' {
		d.pos++
	}
	switch {
	case d.pos < len(d.data) && d.data[d.pos] == '0':
		d.pos++
	case digits() == 0:
		return d.errorf("invalid number")
	}
	if d.pos < len(d.data) && d.data[d.pos] == '.' {
		d.pos++
		if digits() == 0 {
			return d.errorf("invalid number")
		}
	}
	if d.pos < len(d.data) && (d.data[d.pos] == 'e' || d.data[d.pos] == 'E') {
		d.pos++
		if d.pos < len(d.data) && (d.data[d.pos] == '+' || d.data[d.pos] == '-') {
			d.pos++
		}
		if digits() == 0 {
			return d.errorf("invalid number")
		}
	}
	return nil
}

// skipValue moves past the next value, checking its syntax.
func (d *decoder) skipValue() error {
	switch c := d.peek(); {
	case c == '"':
		_, _, err := d.rawStr()
		return err
	case c == '{' || c == '[':
		if d.depth++; d.depth > maxDepth {
			return d.errorf("nested too deeply")
		}
		defer func() { d.depth-- }()
		closing := byte('}')
		if c == '[' {
			closing = ']'
		}
		d.pos++
		if d.peek() == closing {
			d.pos++
			return nil
		}
		for {
			if c == '{' {
				if d.peek() != '"' {
					return d.errorf("object key expected")
				}
				if _, _, err := d.rawStr(); err != nil {
					return err
				}
				if d.peek() != ':' {
					return d.errorf("':' expected after object key")
				}
				d.pos++
			}
			if err := d.skipValue(); err != nil {
				return err
			}
			switch d.peek() {
			case ',':
				d.pos++
			case closing:
				d.pos++
				return nil
			default:
				return d.errorf("',' or %q expected", closing)
			}
		}
	case c == 't':
		if d.literal("true") {
			return nil
		}
	case c == 'f':
		if d.literal("false") {
			return nil
		}
	case c == 'n':
		if d.literal("null") {
			return nil
		}
	case c == '-' || c >= '0' && c <= '9':
		return d.skipNumber()
	}
	return d.errorf("invalid value")
}

// rawStr moves past a string and returns its bytes between the quotes, and whether they need
// unquoting (escapes, invalid UTF-8).
func (d *decoder) rawStr() ([]byte, bool, error) {
	d.pos++ // opening quote
	start := d.pos
	plain := true
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			s := d.data[start:d.pos]
			d.pos++
			return s, !plain, nil
		case c == '\\':
			plain = false
			d.pos++
			if d.pos >= len(d.data) {
				return nil, false, d.errorf("unterminated string")
			}
			switch d.data[d.pos] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.pos++
			case 'u':
				if len(d.data)-d.pos < 5 || !isHex4(d.data[d.pos+1:d.pos+5]) {
					return nil, false, d.errorf("invalid \\u escape")
				}
				d.pos += 5
			default:
				return nil, false, d.errorf("invalid escape")
			}
		case c < 0x20:
			return nil, false, d.errorf("control character in string")
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(d.data[d.pos:])
			if r == utf8.RuneError && size == 1 {
				plain = false
			}
			d.pos += size
		default:
			d.pos++
		}
	}
	return nil, false, d.errorf("unterminated string")
}

func isHex4(b []byte) bool {
	for _, c := range b[:4] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// str decodes the next string value.
func (d *decoder) str() (string, error) {
	raw, escaped, err := d.rawStr()
	if err != nil {
		return "", err
	}
	return d.keyString(raw, escaped), nil
}

// keyString turns a string's raw bytes (already checked by rawStr) into its value, as
// encoding/json does: escapes decoded, invalid UTF-8 and lone surrogates as U+FFFD.
func (d *decoder) keyString(raw []byte, escaped bool) string {
	if !escaped {
		return string(raw)
	}
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		c := raw[i]
		if c == '\\' {
			switch raw[i+1] {
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r := hex4(raw[i+2 : i+6])
				i += 6
				if utf16.IsSurrogate(r) {
					if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
						if pair := utf16.DecodeRune(r, hex4(raw[i+2:i+6])); pair != utf8.RuneError {
							out = utf8.AppendRune(out, pair)
							i += 6
							continue
						}
					}
					r = utf8.RuneError
				}
				out = utf8.AppendRune(out, r)
				continue
			default: // '"', '\\', '/'
				out = append(out, raw[i+1])
			}
			i += 2
			continue
		}
		if c < utf8.RuneSelf {
			out = append(out, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(raw[i:])
		if r == utf8.RuneError && size == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, raw[i:i+size]...)
		}
		i += size
	}
	return string(out)
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		default:
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}
