// Package armjson encodes and decodes the Azure SDK's resource models (armnetwork, armcompute)
// to and from the same JSON as the SDK's generated MarshalJSON and UnmarshalJSON, without their
// intermediate maps.
//
// The generated methods build a map[string]any (to marshal) or a map[string]json.RawMessage (to
// unmarshal) for every struct of a document, and the raw message of every nested field is
// decoded again one level down. For a load balancer with 5,000 backend addresses (1.4 MB of
// JSON) that is about 28 MB allocated to encode it and 36 MB to decode it, all of it live at
// once: in a burst of writes on a large cluster this was the controller's largest transient
// memory. The codec walks the structs with reflection instead and allocates little beyond its
// output.
//
// Field names are not guessed from Go names: the codec learns each struct's JSON names from the
// SDK's own methods (one field set at a time, marshalled, and unmarshalled back), so a new SDK
// version brings its names with it. A struct it cannot model exactly (time fields, which the SDK
// formats its own way; non-pointer fields; anything its probe does not confirm) is handed to the
// SDK's methods, with everything below it.
package armjson

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Codec holds what it learnt of each model type. It is safe for concurrent use; one per process
// is enough (learning a type costs a few SDK round trips per field, once).
type Codec struct {
	mu    sync.RWMutex
	types map[reflect.Type]*structInfo
}

// New returns an empty codec.
func New() *Codec {
	return &Codec{types: map[reflect.Type]*structInfo{}}
}

// structInfo is what the codec knows of one struct type.
type structInfo struct {
	// delegated: the type is encoded and decoded by its own JSON methods.
	delegated bool
	// why says why a type is delegated (tests and debugging).
	why string
	// fields in the order the SDK writes them (by JSON name: it marshals a map).
	fields []fieldInfo
	byName map[string]int // JSON name → index into fields
	// lastSize is the length of the last document of this type Marshal wrote.
	lastSize atomic.Int64
}

type fieldInfo struct {
	index int    // struct field index
	name  string // JSON name
	key   []byte // `"name":`, ready to append
}

var (
	marshalerType   = reflect.TypeFor[json.Marshaler]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	timeType        = reflect.TypeFor[time.Time]()
)

// info returns what the codec knows of struct type t, learning it first if needed.
func (c *Codec) info(t reflect.Type) *structInfo {
	c.mu.RLock()
	si := c.types[t]
	c.mu.RUnlock()
	if si != nil {
		return si
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.learn(t)
}

// learn fills the codec's entry for t (c.mu held). Nested types are learnt when first met while
// encoding or decoding, not here, so recursive model types need no special care.
func (c *Codec) learn(t reflect.Type) *structInfo {
	if si := c.types[t]; si != nil {
		return si
	}
	si := probe(t)
	c.types[t] = si
	return si
}

// Delegated reports whether values of struct type t go through their own JSON methods, and why.
func (c *Codec) Delegated(t reflect.Type) (bool, string) {
	si := c.info(t)
	return si.delegated, si.why
}

func delegate(why string, args ...any) *structInfo {
	return &structInfo{delegated: true, why: fmt.Sprintf(why, args...)}
}

// probe learns t's JSON names from its own methods.
func probe(t reflect.Type) *structInfo {
	if t == timeType || !t.Implements(marshalerType) || !reflect.PointerTo(t).Implements(unmarshalerType) {
		return delegate("%s has no JSON methods of its own", t)
	}
	si := &structInfo{byName: map[string]int{}}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			return delegate("%s.%s is unexported", t, f.Name)
		}
		if !supportedField(f.Type) {
			return delegate("%s.%s has type %s", t, f.Name, f.Type)
		}
		name, err := probeField(t, i)
		if err != nil {
			return delegate("%s.%s: %v", t, f.Name, err)
		}
		if name == "" {
			continue // the SDK neither writes nor reads it
		}
		if _, dup := si.byName[name]; dup {
			return delegate("%s: two fields are written as %q", t, name)
		}
		si.byName[name] = i
		si.fields = append(si.fields, fieldInfo{index: i, name: name})
	}
	sort.Slice(si.fields, func(a, b int) bool { return si.fields[a].name < si.fields[b].name })
	for i := range si.fields {
		k, _ := json.Marshal(si.fields[i].name)
		si.fields[i].key = append(k, ':')
		si.byName[si.fields[i].name] = i
	}
	return si
}

// supportedField: a pointer, slice or map (the SDK omits them when nil) down to basic values or
// structs with JSON methods of their own. time.Time is formatted by the parent's methods, so a
// struct holding one is delegated whole.
func supportedField(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer:
		return supportedElem(t.Elem())
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return false // []byte: base64 in a format the parent chooses
		}
		return supportedElem(t.Elem()) || (t.Elem().Kind() == reflect.Pointer && supportedElem(t.Elem().Elem()))
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return false
		}
		return supportedElem(t.Elem()) || (t.Elem().Kind() == reflect.Pointer && supportedElem(t.Elem().Elem()))
	}
	return false
}

func supportedElem(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return true
	case reflect.Struct:
		return t != timeType && t.Implements(marshalerType) && reflect.PointerTo(t).Implements(unmarshalerType)
	}
	return false
}

// probeField finds the JSON name of field i of t: set alone (to an empty but non-nil value), the
// SDK must write exactly one key, and reading that key back must set that field alone. It
// returns "" for a field the SDK does not write at all.
func probeField(t reflect.Type, i int) (string, error) {
	v := reflect.New(t).Elem()
	f := v.Field(i)
	switch f.Kind() {
	case reflect.Pointer:
		f.Set(reflect.New(f.Type().Elem()))
	case reflect.Slice:
		f.Set(reflect.MakeSlice(f.Type(), 0, 0))
	case reflect.Map:
		f.Set(reflect.MakeMap(f.Type()))
	}
	out, err := json.Marshal(v.Interface())
	if err != nil {
		return "", err
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(out, &keys); err != nil {
		return "", err
	}
	if len(keys) == 0 {
		return "", nil
	}
	if len(keys) != 1 {
		return "", fmt.Errorf("written as %d keys", len(keys))
	}
	var name string
	for k := range keys {
		name = k
	}
	back := reflect.New(t)
	if err := json.Unmarshal(out, back.Interface()); err != nil {
		return "", fmt.Errorf("reading %q back: %w", name, err)
	}
	for j := range t.NumField() {
		set := !back.Elem().Field(j).IsZero()
		if set != (j == i) {
			return "", fmt.Errorf("reading %q back sets field %d", name, j)
		}
	}
	return name, nil
}
