package migration

import (
	"context"
	"errors"
)

// Preview plans the migration from what Azure and the cluster hold now and writes nothing: the
// steps Run would take first (the plan command prints them). Network, Compute, Kube and Config
// are the options it needs; a configuration that is not Standard, or a cluster without Basic
// load balancers, gives an empty plan.
func Preview(ctx context.Context, o Options) (*Plan, error) {
	if o.Config == nil || !o.Config.IsStandardSKU() {
		return &Plan{}, nil
	}
	if o.Network == nil || o.Compute == nil || o.Kube == nil {
		return nil, errors.New("migration preview: Network, Compute and Kube are required")
	}
	x := &executor{o: o, res: &Result{}}
	in, _, err := x.read(ctx)
	if err != nil {
		return nil, err
	}
	return Build(in), nil
}
