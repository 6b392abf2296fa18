package compute

import (
	"encoding/json"
	"fmt"
)

// MergeJSON deep-merges patch into base and returns base. Objects merge key by
// key, arrays and scalars replace the old value wholesale, and an explicit null
// removes the key (RFC 7386 semantics). This is how the emulator treats a PUT
// or PATCH on an existing compute resource: the CCM sends partial bodies (only
// the network profile, the etag and the location) and expects everything else
// it did not mention to survive.
func MergeJSON(base, patch map[string]any) map[string]any {
	if base == nil {
		base = map[string]any{}
	}
	for k, pv := range patch {
		if pv == nil {
			delete(base, k)
			continue
		}
		pm, pIsObj := pv.(map[string]any)
		bm, bIsObj := base[k].(map[string]any)
		if pIsObj && bIsObj {
			base[k] = MergeJSON(bm, pm)
			continue
		}
		if pIsObj {
			// A new object still must not carry nulls into the result.
			base[k] = MergeJSON(map[string]any{}, pm)
			continue
		}
		base[k] = pv
	}
	return base
}

// MergeModel applies a JSON request body onto an existing SDK model (nil means
// create) and returns the merged model as a new value; existing is untouched.
func MergeModel[T any](existing *T, body []byte) (*T, error) {
	var patch map[string]any
	if err := json.Unmarshal(body, &patch); err != nil {
		return nil, fmt.Errorf("request body is not a JSON object: %w", err)
	}
	base := map[string]any{}
	if existing != nil {
		raw, err := json.Marshal(existing)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &base); err != nil {
			return nil, err
		}
	}
	merged, err := json.Marshal(MergeJSON(base, patch))
	if err != nil {
		return nil, err
	}
	out := new(T)
	if err := json.Unmarshal(merged, out); err != nil {
		return nil, fmt.Errorf("request body does not match the resource schema: %w", err)
	}
	return out, nil
}

// Clone deep-copies an SDK model through its JSON form, so that stored state is
// never aliased by a handler that mutates what it returns.
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
