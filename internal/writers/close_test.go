package writers

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/writer"
)

// noToken is a credential no test call reaches: a closed writer refuses before any ARM call.
type noToken struct{}

func (noToken) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{}, errors.New("no token in this test")
}

// TestCloseClosesEveryRegistry walks the Set's fields, so a registry added to the set without
// being closed fails here: after Close, an action given to any writer of any registry (one made
// before Close or after) is refused with writer.ErrClosed and never runs.
func TestCloseClosesEveryRegistry(t *testing.T) {
	net, err := armnetwork.NewClientFactory("00000000-0000-0000-0000-000000000000", noToken{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	compute, err := armcompute.NewClientFactory("00000000-0000-0000-0000-000000000000", noToken{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{Network: net, Compute: compute})
	const before, after = "/subscriptions/s/resourceGroups/rg/providers/p/t/before", "/subscriptions/s/resourceGroups/rg/providers/p/t/after"
	v := reflect.ValueOf(s).Elem()
	for i := range v.NumField() {
		v.Field(i).MethodByName("For").Call([]reflect.Value{reflect.ValueOf(before)})
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("Close of idle writers: %v", err)
	}
	ctx := reflect.ValueOf(context.Background())
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		for _, id := range []string{before, after} {
			w := v.Field(i).MethodByName("For").Call([]reflect.Value{reflect.ValueOf(id)})[0]
			do := w.MethodByName("Do")
			ran := false
			action := reflect.MakeFunc(do.Type().In(1), func([]reflect.Value) []reflect.Value {
				ran = true
				return []reflect.Value{reflect.Zero(reflect.TypeFor[error]())}
			})
			res := do.Call([]reflect.Value{ctx, action})[0]
			if err, _ := res.Interface().(error); !errors.Is(err, writer.ErrClosed) || ran {
				t.Errorf("%s writer of %s after Close: error %v, action ran %t; want writer.ErrClosed and no run", name, id, err, ran)
			}
		}
	}
}
