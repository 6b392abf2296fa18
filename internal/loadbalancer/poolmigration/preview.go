package poolmigration

import (
	"context"
	"errors"
)

// Preview plans the migration from what Azure and the cluster hold now and writes nothing: the
// steps Run would take first (the plan command prints them). A configuration without nodeIP
// pools, or a cluster whose pools are IP-based already, gives an empty plan. Writers are only
// read from (their caches are dropped and read again).
func Preview(ctx context.Context, o Options) (*Plan, error) {
	if !Needed(o.Config) {
		return &Plan{}, nil
	}
	if o.Writers == nil || o.Caches == nil || o.Nodes == nil || o.Kube == nil {
		return nil, errors.New("pool migration preview: Writers, Caches, Nodes and Kube are required")
	}
	x := &executor{o: o, res: &Result{}}
	in, err := x.read(ctx)
	if err != nil {
		return nil, err
	}
	return Build(in), nil
}
