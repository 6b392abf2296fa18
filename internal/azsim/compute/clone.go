package compute

import (
	"encoding/json"
	"fmt"
)

// Clone deep-copies an SDK model through its JSON form, so that a new
// instance never aliases the scale set model it was built from.
func Clone[T any](v *T) *T {
	if v == nil {
		return nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("compute: cloning %T: %v", v, err))
	}
	out := new(T)
	if err := json.Unmarshal(raw, out); err != nil {
		panic(fmt.Sprintf("compute: cloning %T: %v", v, err))
	}
	return out
}
