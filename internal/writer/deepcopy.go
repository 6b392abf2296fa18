package writer

import (
	"reflect"
	"sync"
)

// DeepCopy copies a model of plain data (the Azure SDK's generated structs: pointers, slices,
// maps, interfaces holding the same) with reflection. It is the writers' default Clone: a JSON
// round trip of a load balancer whose pools hold 5,000 addresses costs tens of milliseconds and
// megabytes of garbage per copy, and a writer copies its model several times per batch.
// Unexported struct fields are copied by value (time.Time's location pointer stays shared, which
// is what time.Time's own copies do). Models must not contain cycles.
func DeepCopy[T any](v *T) *T {
	if v == nil {
		return nil
	}
	out := new(T)
	copyInto(reflect.ValueOf(out).Elem(), reflect.ValueOf(v).Elem())
	return out
}

// copyInto sets dst (settable, same type as src) to a deep copy of src.
func copyInto(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		p := reflect.New(src.Type().Elem())
		copyInto(p.Elem(), src.Elem())
		dst.Set(p)
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		n := src.Len()
		s := reflect.MakeSlice(src.Type(), n, n)
		if isPlain(src.Type().Elem()) {
			reflect.Copy(s, src)
		} else {
			for i := range n {
				copyInto(s.Index(i), src.Index(i))
			}
		}
		dst.Set(s)
	case reflect.Map:
		if src.IsNil() {
			return
		}
		m := reflect.MakeMapWithSize(src.Type(), src.Len())
		et := src.Type().Elem()
		iter := src.MapRange()
		for iter.Next() {
			e := reflect.New(et).Elem()
			copyInto(e, iter.Value())
			m.SetMapIndex(iter.Key(), e) // keys of JSON models are strings
		}
		dst.Set(m)
	case reflect.Interface:
		if src.IsNil() {
			return
		}
		e := reflect.New(src.Elem().Type()).Elem()
		copyInto(e, src.Elem())
		dst.Set(e)
	case reflect.Struct:
		dst.Set(src) // every field by value, unexported ones included
		for _, i := range deepFields(src.Type()) {
			copyInto(dst.Field(i), src.Field(i))
		}
	case reflect.Array:
		if isPlain(src.Type()) {
			dst.Set(src)
			return
		}
		for i := range src.Len() {
			copyInto(dst.Index(i), src.Index(i))
		}
	default:
		dst.Set(src)
	}
}

var (
	plainTypes     sync.Map // reflect.Type → bool
	deepFieldTypes sync.Map // reflect.Type → []int
)

// isPlain reports whether a value of t holds no reference, so a shallow copy is a deep one.
func isPlain(t reflect.Type) bool {
	if v, ok := plainTypes.Load(t); ok {
		return v.(bool)
	}
	var plain bool
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		plain = false
	case reflect.Struct:
		plain = len(deepFields(t)) == 0 && !hasUnexportedRefs(t)
	case reflect.Array:
		plain = isPlain(t.Elem())
	default:
		plain = true
	}
	plainTypes.Store(t, plain)
	return plain
}

// hasUnexportedRefs reports unexported reference fields, which copies share (see DeepCopy).
func hasUnexportedRefs(t reflect.Type) bool {
	for i := range t.NumField() {
		if f := t.Field(i); !f.IsExported() && !isPlain(f.Type) {
			return true
		}
	}
	return false
}

// deepFields lists the exported fields of struct type t that need more than a value copy.
func deepFields(t reflect.Type) []int {
	if v, ok := deepFieldTypes.Load(t); ok {
		return v.([]int)
	}
	var idx []int
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() && !isPlain(f.Type) {
			idx = append(idx, i)
		}
	}
	deepFieldTypes.Store(t, idx)
	return idx
}

// DeepEqual reports whether two models of plain data are equal, with reflect.DeepEqual's rules
// for such data (nil and empty slices or maps differ) but without its record of visited
// pointers: models have no cycles, and that record cost a gigabyte of garbage per minute in a
// 5,000-node burst.
func DeepEqual[T any](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return equal(reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem())
}

func equal(a, b reflect.Value) bool {
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		if a.Kind() == reflect.Interface && a.Elem().Type() != b.Elem().Type() {
			return false
		}
		return equal(a.Elem(), b.Elem())
	case reflect.Slice, reflect.Array:
		if a.Kind() == reflect.Slice && (a.IsNil() != b.IsNil() || a.Len() != b.Len()) {
			return false
		}
		for i := range a.Len() {
			if !equal(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		iter := a.MapRange()
		for iter.Next() {
			bv := b.MapIndex(iter.Key())
			if !bv.IsValid() || !equal(iter.Value(), bv) {
				return false
			}
		}
		return true
	case reflect.Struct:
		for i := range a.NumField() {
			if !equal(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.String:
		return a.String() == b.String()
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return a.Uint() == b.Uint()
	case reflect.Float32, reflect.Float64:
		return a.Float() == b.Float()
	case reflect.Complex64, reflect.Complex128:
		return a.Complex() == b.Complex()
	default: // channels, functions: not in models
		return false
	}
}
