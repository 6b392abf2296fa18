package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/azure-ccm/azure-ccm/internal/azsim/client"
	"github.com/azure-ccm/azure-ccm/internal/azsim/drift"
	"github.com/azure-ccm/azure-ccm/internal/azsim/middleware"
)

type clientFunc func() (*client.Client, error)

type command func(ctx context.Context, fs *flag.FlagSet, args []string, c clientFunc) error

var clientCommands = map[string]command{
	"seed":          seedCmd,
	"fault":         faultCmd,
	"latency":       latencyCmd,
	"throttle":      throttleCmd,
	"stats":         statsCmd,
	"get":           getCmd,
	"list":          listCmd,
	"imds-vm":       imdsVMCmd,
	"vm":            vmCmd,
	"pe-connection": peConnectionCmd,
	"drift":         driftCmd,
	"reset":         simple(func(ctx context.Context, c *client.Client) error { return c.Reset(ctx) }),
	"info": simple(func(ctx context.Context, c *client.Client) error {
		i, err := c.Info(ctx)
		if err != nil {
			return err
		}
		return printJSON(i)
	}),
}

func simple(fn func(ctx context.Context, c *client.Client) error) command {
	return func(ctx context.Context, fs *flag.FlagSet, args []string, cf clientFunc) error {
		if err := fs.Parse(args); err != nil {
			return err
		}
		c, err := cf()
		if err != nil {
			return err
		}
		return fn(ctx, c)
	}
}

func seedCmd(ctx context.Context, fs *flag.FlagSet, args []string, cf clientFunc) error {
	file := fs.String("f", "", "topology file (YAML or JSON); - for stdin")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" {
		return errors.New("seed: -f topology.yaml is required")
	}
	var doc []byte
	var err error
	if *file == "-" {
		doc, err = io.ReadAll(os.Stdin)
	} else {
		doc, err = os.ReadFile(*file)
	}
	if err != nil {
		return err
	}
	c, err := cf()
	if err != nil {
		return err
	}
	res, err := c.SeedYAML(ctx, doc)
	if err != nil {
		return err
	}
	return printJSON(res)
}

func faultCmd(ctx context.Context, fs *flag.FlagSet, args []string, cf clientFunc) error {
	if len(args) == 0 {
		return errors.New("fault: add|list|rm <id>|clear")
	}
	sub, args := args[0], args[1:]
	var f middleware.Fault
	var delay, lroDur time.Duration
	jsonRule := fs.String("json", "", "the whole rule as JSON (overrides the other flags)")
	fs.StringVar(&f.ID, "id", "", "rule ID (default: generated)")
	fs.StringVar((*string)(&f.Kind), "kind", "", "throttle, precondition, conflict, error, lroFailed, slowLRO or latency")
	fs.StringVar((*string)(&f.Class), "class", "", "read, write, delete or action (default: any)")
	fs.StringVar(&f.ResourceType, "type", "", "resource type, e.g. loadBalancers or Microsoft.Network/publicIPAddresses (default: any)")
	fs.StringVar(&f.Method, "method", "", "HTTP method (default: any)")
	fs.StringVar(&f.PathContains, "path", "", "only requests whose path contains this text")
	fs.Float64Var(&f.Rate, "rate", 0, "probability 0..1 that a matching request is hit (0: always)")
	fs.IntVar(&f.Count, "count", 0, "retire the rule after this many hits (0: never)")
	fs.IntVar(&f.Status, "status", 0, "status for kind=error (default 500)")
	fs.StringVar(&f.Code, "code", "", "ARM error code (default per kind)")
	fs.StringVar(&f.Message, "message", "", "ARM error message")
	fs.IntVar(&f.RetryAfterSeconds, "retry-after", 0, "Retry-After seconds (throttle default 1)")
	fs.DurationVar(&delay, "delay", 0, "added latency for kind=latency")
	fs.DurationVar(&lroDur, "lro-duration", 0, "operation duration for kind=slowLRO")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := cf()
	if err != nil {
		return err
	}
	switch sub {
	case "add":
		f.Delay, f.LRODuration = middleware.Duration(delay), middleware.Duration(lroDur)
		if *jsonRule != "" {
			f = middleware.Fault{}
			if err := json.Unmarshal([]byte(*jsonRule), &f); err != nil {
				return fmt.Errorf("--json: %w", err)
			}
		}
		got, err := c.AddFault(ctx, f)
		if err != nil {
			return err
		}
		return printJSON(got)
	case "list":
		fsList, err := c.Faults(ctx)
		if err != nil {
			return err
		}
		return printJSON(fsList)
	case "rm":
		if fs.NArg() != 1 {
			return errors.New("fault rm <id>")
		}
		return c.RemoveFault(ctx, fs.Arg(0))
	case "clear":
		return c.ClearFaults(ctx)
	}
	return fmt.Errorf("fault: unknown subcommand %q (add, list, rm, clear)", sub)
}

func latencyCmd(ctx context.Context, fs *flag.FlagSet, args []string, cf clientFunc) error {
	if len(args) == 0 {
		return errors.New("latency: get | set -f model.json | set --realistic | clear")
	}
	sub, args := args[0], args[1:]
	file := fs.String("f", "", "latency model (JSON)")
	realistic := fs.Bool("realistic", false, "the built-in realistic model")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := cf()
	if err != nil {
		return err
	}
	switch sub {
	case "get":
		m, err := c.Latency(ctx)
		if err != nil {
			return err
		}
		return printJSON(m)
	case "clear":
		return c.SetLatency(ctx, middleware.LatencyModel{})
	case "set":
		m := middleware.RealisticLatency()
		if !*realistic {
			if *file == "" {
				return errors.New("latency set: give -f model.json or --realistic")
			}
			b, err := os.ReadFile(*file)
			if err != nil {
				return err
			}
			m = middleware.LatencyModel{}
			if err := json.Unmarshal(b, &m); err != nil {
				return fmt.Errorf("%s: %w", *file, err)
			}
		}
		return c.SetLatency(ctx, m)
	}
	return fmt.Errorf("latency: unknown subcommand %q", sub)
}

func throttleCmd(ctx context.Context, fs *flag.FlagSet, args []string, cf clientFunc) error {
	if len(args) == 0 {
		return errors.New("throttle: get | set [flags] | off")
	}
	sub, args := args[0], args[1:]
	d := middleware.DefaultThrottle()
	m := d
	fs.BoolVar(&m.Enabled, "enabled", true, "refuse requests when a bucket is empty")
	fs.Float64Var(&m.Reads.Capacity, "reads", d.Reads.Capacity, "read bucket size")
	fs.Float64Var(&m.Reads.RefillPerSecond, "reads-refill", d.Reads.RefillPerSecond, "read tokens per second")
	fs.Float64Var(&m.Writes.Capacity, "writes", d.Writes.Capacity, "write bucket size")
	fs.Float64Var(&m.Writes.RefillPerSecond, "writes-refill", d.Writes.RefillPerSecond, "write tokens per second")
	fs.Float64Var(&m.Deletes.Capacity, "deletes", d.Deletes.Capacity, "delete bucket size")
	fs.Float64Var(&m.Deletes.RefillPerSecond, "deletes-refill", d.Deletes.RefillPerSecond, "delete tokens per second")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := cf()
	if err != nil {
		return err
	}
	switch sub {
	case "get":
		t, err := c.Throttle(ctx)
		if err != nil {
			return err
		}
		return printJSON(t)
	case "set":
		return c.SetThrottle(ctx, m)
	case "off":
		return c.SetThrottle(ctx, d)
	}
	return fmt.Errorf("throttle: unknown subcommand %q", sub)
}

func statsCmd(ctx context.Context, fs *flag.FlagSet, args []string, cf clientFunc) error {
	reset := fs.Bool("reset", false, "zero the counters")
	prom := fs.Bool("prometheus", false, "print the Prometheus metrics text")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := cf()
	if err != nil {
		return err
	}
	switch {
	case *reset:
		return c.ResetStats(ctx)
	case *prom:
		m, err := c.Metrics(ctx)
		if err != nil {
			return err
		}
		fmt.Print(m)
		return nil
	}
	s, err := c.Stats(ctx)
	if err != nil {
		return err
	}
	return printJSON(s)
}

func oneArg(fs *flag.FlagSet, args []string, what string) (string, error) {
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	if fs.NArg() != 1 {
		return "", fmt.Errorf("%s: exactly one argument expected", what)
	}
	return fs.Arg(0), nil
}

func getCmd(ctx context.Context, fs *flag.FlagSet, args []string, cf clientFunc) error {
	id, err := oneArg(fs, args, "get <resource id>")
	if err != nil {
		return err
	}
	c, err := cf()
	if err != nil {
		return err
	}
	r, err := c.Get(ctx, id)
	if err != nil {
		return err
	}
	return printJSON(r)
}

func listCmd(ctx context.Context, fs *flag.FlagSet, args []string, cf clientFunc) error {
	typ, err := oneArg(fs, args, "list <resource type>")
	if err != nil {
		return err
	}
	c, err := cf()
	if err != nil {
		return err
	}
	r, err := c.List(ctx, typ)
	if err != nil {
		return err
	}
	return printJSON(r)
}

func imdsVMCmd(ctx context.Context, fs *flag.FlagSet, args []string, cf clientFunc) error {
	vm, err := oneArg(fs, args, "imds-vm <vm>")
	if err != nil {
		return err
	}
	c, err := cf()
	if err != nil {
		return err
	}
	return c.SetIMDSDefaultVM(ctx, vm)
}

func vmCmd(ctx context.Context, fs *flag.FlagSet, args []string, cf clientFunc) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return errors.New("vm <delete|deallocate|powerOff|start|restart> <resource id>")
	}
	c, err := cf()
	if err != nil {
		return err
	}
	return c.VMAction(ctx, fs.Arg(1), fs.Arg(0))
}

func peConnectionCmd(ctx context.Context, fs *flag.FlagSet, args []string, cf clientFunc) error {
	desc := fs.String("description", "", "reason shown on the connection (approve, reject)")
	// Flags may follow the positional arguments: azsim pe-connection approve <id> -description x.
	var pos []string
	for len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		pos, args = append(pos, args[0]), args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	pos = append(pos, fs.Args()...)
	if len(pos) != 2 {
		return errors.New("pe-connection <approve|reject|remove> <private endpoint connection id> [-description text]")
	}
	c, err := cf()
	if err != nil {
		return err
	}
	return c.ConnectionAction(ctx, pos[1], pos[0], *desc)
}

func driftCmd(ctx context.Context, fs *flag.FlagSet, args []string, cf clientFunc) error {
	var r client.DriftRequest
	fs.StringVar(&r.Pool, "pool", "", "remove-pool-member: the backend pool")
	fs.IntVar(&r.IntervalInSeconds, "interval", 0, "change-probe: the new interval in seconds (default: 5 more)")
	fs.StringVar(&r.PublicIP, "public-ip", "", "change-frontend-ip: the public IP ID (default: a new one)")
	// Flags may follow the positional arguments: azsim drift remove-pool-member <lb> <member> -pool p.
	var pos []string
	for len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		pos, args = append(pos, args[0]), args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	pos = append(pos, fs.Args()...)
	if len(pos) != 3 {
		return fmt.Errorf("drift <%s> <load balancer or NSG id> <rule, probe, NSG rule, frontend or pool member> [-pool p] [-interval s] [-public-ip id]",
			strings.Join(driftKinds(), "|"))
	}
	r.Kind, r.Resource, r.Name = drift.Kind(pos[0]), pos[1], pos[2]
	c, err := cf()
	if err != nil {
		return err
	}
	res, err := c.Drift(ctx, r)
	if err != nil {
		return err
	}
	return printJSON(res)
}

func driftKinds() []string {
	out := make([]string, 0, len(drift.Kinds))
	for _, k := range drift.Kinds {
		out = append(out, string(k))
	}
	return out
}
