package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/azure-ccm/azure-ccm/internal/azsim/identity"
	"github.com/azure-ccm/azure-ccm/internal/azsim/middleware"
	"github.com/azure-ccm/azure-ccm/internal/azsim/server"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
)

func serve(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("azsim serve", flag.ContinueOnError)
	var (
		o             server.Options
		extraNames    = fs.String("extra-names", "", "extra certificate names (comma separated DNS names or IPs)")
		credsFile     = fs.String("credentials", "", "JSON file with the accepted identities (identity.Credentials); default: built-in tenant, client and managed identities")
		tenant        = fs.String("tenant", server.DefaultTenantID, "tenant ID (with the built-in identities)")
		clientID      = fs.String("client-id", server.DefaultClientID, "service principal client ID (with the built-in identities)")
		clientSecret  = fs.String("client-secret", server.DefaultClientSecret, "service principal secret (with the built-in identities)")
		topoFile      = fs.String("topology", "", "topology file (YAML/JSON) to seed at start")
		envFile       = fs.String("env-file", "", "write SSL_CERT_FILE, AZSIM_URL, AZURE_* and IDENTITY_* to this file")
		latencyFile   = fs.String("latency", "", "latency model file (JSON)")
		realistic     = fs.Bool("realistic-latency", false, "use the built-in realistic latency model")
		throttle      = fs.Bool("throttle", false, "enable ARM throttling with ARM's default token buckets")
		printMachines = fs.Bool("print-machines", false, "print the seeded machines as JSON")
	)
	fs.StringVar(&o.Addr, "addr", "127.0.0.1:8443", "HTTPS listen address (ARM, identity, control API)")
	fs.StringVar(&o.IMDSAddr, "imds-addr", "127.0.0.1:0", `IMDS listen address (plain HTTP; "off" disables)`)
	fs.StringVar(&o.Dir, "dir", "", "directory for ca.pem and ca-bundle.pem (default: a temporary directory)")
	fs.StringVar(&o.StateFile, "state", "", "state file: loaded at start, written at exit")
	fs.StringVar(&o.SubscriptionID, "subscription", topology.DefaultSubscriptionID, "default subscription ID")
	fs.StringVar(&o.Location, "location", topology.DefaultLocation, "default location")
	fs.StringVar(&o.CloudName, "cloud-name", "AzureCloud", "cloud name in /metadata/endpoints")
	fs.DurationVar(&o.LRODuration, "lro-duration", 0, "how long writes stay in progress")
	fs.DurationVar(&o.PollRetryAfter, "poll-retry-after", 0, "retry-after-ms sent while operations run (0: none)")
	fs.IntVar(&o.PageSize, "page-size", 100, "list page size")
	fs.DurationVar(&o.TokenLifetime, "token-lifetime", time.Hour, "access token lifetime")
	fs.Uint64Var(&o.FaultSeed, "fault-seed", 1, "seed for fault rates")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.ExtraNames = splitList(*extraNames)
	creds := server.DefaultCredentials()
	creds.TenantID = *tenant
	creds.Clients = []identity.Client{{ClientID: *clientID, Secret: *clientSecret}}
	if *credsFile != "" {
		b, err := os.ReadFile(*credsFile)
		if err != nil {
			return err
		}
		creds = identity.Credentials{}
		if err := json.Unmarshal(b, &creds); err != nil {
			return fmt.Errorf("%s: %w", *credsFile, err)
		}
	}
	o.Credentials = &creds
	if *topoFile != "" {
		t, err := topology.Load(*topoFile)
		if err != nil {
			return err
		}
		o.Topology = t
	}
	if *realistic {
		o.Latency = middleware.RealisticLatency()
	}
	if *latencyFile != "" {
		b, err := os.ReadFile(*latencyFile)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &o.Latency); err != nil {
			return fmt.Errorf("%s: %w", *latencyFile, err)
		}
	}
	t := middleware.DefaultThrottle()
	t.Enabled = *throttle
	o.Throttle = &t
	o.Logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	// "ready" is printed on stdout below, once; keep the log for the rest.
	logf := o.Logf
	o.Logf = func(format string, args ...any) {
		if len(format) >= 11 && format[:11] == "azsim ready" {
			return
		}
		logf(format, args...)
	}

	if w := exposedWarning("--addr", o.Addr); w != "" {
		logf("%s", w)
	}
	if w := exposedWarning("--imds-addr", o.IMDSAddr); w != "" && o.IMDSAddr != "off" {
		logf("%s", w)
	}
	s, err := server.Start(ctx, o)
	if err != nil {
		return err
	}
	if *envFile != "" {
		if err := s.WriteEnvFile(*envFile); err != nil {
			_ = s.Close()
			return err
		}
	}
	if *printMachines && s.SeedResult() != nil {
		_ = printJSON(s.SeedResult())
	}
	fmt.Printf("azsim ready url=%s imds=%s ca=%s\n", s.URL(), s.IMDSURL(), s.CAFile())
	<-ctx.Done()
	return s.Close()
}

// exposedWarning is a warning when addr listens beyond the loopback interface: azsim's control
// API (seed, reset, faults) and IMDS take no credentials, so anyone who reaches the address can
// change or read the simulated cloud and obtain tokens. Empty for a loopback address.
func exposedWarning(flagName, addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return ""
	}
	if host == "" {
		host = "every interface"
	}
	return fmt.Sprintf("warning: %s %s listens on %s, beyond the loopback interface; azsim's control API and identity endpoints "+
		"take no credentials, so anyone who reaches it can change the simulated cloud and obtain tokens", flagName, addr, host)
}
