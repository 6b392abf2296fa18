// Command azsim runs a local Azure (ARM, Entra ID, IMDS) and drives a running one.
//
//	azsim serve [flags]                  start the emulator; prints "azsim ready url=… imds=… ca=…"
//	azsim seed -f topology.yaml          build a topology, print its machines
//	azsim fault add|list|rm|clear …      fault rules
//	azsim latency set -f model.json      latency model (azsim latency get)
//	azsim throttle set|get …             ARM throttling model
//	azsim stats [--reset]                request counters (--prometheus for the metrics text)
//	azsim get <resource id>              one resource
//	azsim list <type>                    all resources of a type
//	azsim imds-vm <vm>                   IMDS default VM
//	azsim vm <delete|deallocate|powerOff|start|restart> <id>
//	azsim pe-connection <approve|reject|remove> <id>   a private link service owner's decision
//	azsim drift <kind> <resource id> <name> [flags]    a third party's edit (rule deleted …)
//	azsim reset                          drop all state
//
// Client commands find the server through --url/AZSIM_URL and trust it through --ca/AZSIM_CA.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	// Mozilla's CA roots in the binary, used when the system has none (the images carry no
	// CA bundle); SSL_CERT_FILE or a system bundle still take precedence.
	_ "golang.org/x/crypto/x509roots/fallback"

	"k8s.io/component-base/version"

	"github.com/azure-ccm/azure-ccm/internal/azsim/client"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "azsim:", err)
		os.Exit(1)
	}
}

const usage = `usage: azsim <command> [flags]

commands:
  serve       run the emulator (azsim serve -h for flags)
  seed        -f topology.yaml: build a topology and print its machines
  fault       add|list|rm <id>|clear
  latency     get | set -f model.json | set --realistic | clear
  throttle    get | set [--enabled] [--reads N --reads-refill N ...] | off
  stats       [--reset] [--prometheus]
  get         <resource id>
  list        <resource type, e.g. Microsoft.Network/loadBalancers>
  imds-vm     <vm name, computer name or resource id>
  vm          <delete|deallocate|powerOff|start|restart> <resource id>
  pe-connection <approve|reject|remove> <connection id> [-description text]
  drift       <delete-rule|change-probe|remove-nsg-rule|remove-pool-member|change-frontend-ip>
              <load balancer or NSG id> <name> [-pool p] [-interval s] [-public-ip id]
  reset       drop every resource, fault rule and counter
  info        describe the running server
  version     print the version this binary was built from

client commands take --url (default $AZSIM_URL) and --ca (default $AZSIM_CA).`

func run(args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return errors.New("no command given")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd, rest := args[0], args[1:]
	if cmd == "serve" {
		return serve(ctx, rest)
	}
	if cmd == "version" || cmd == "--version" {
		fmt.Println(versionString())
		return nil
	}
	if cmd == "help" || cmd == "-h" || cmd == "--help" {
		fmt.Println(usage)
		return nil
	}
	h, ok := clientCommands[cmd]
	if !ok {
		return fmt.Errorf("unknown command %q\n\n%s", cmd, usage)
	}
	fs := flag.NewFlagSet("azsim "+cmd, flag.ContinueOnError)
	url := fs.String("url", os.Getenv("AZSIM_URL"), "azsim base URL")
	ca := fs.String("ca", os.Getenv("AZSIM_CA"), "azsim CA file")
	return h(ctx, fs, rest, func() (*client.Client, error) {
		if *url == "" {
			return nil, errors.New("no server: give --url or set AZSIM_URL")
		}
		return client.New(*url, *ca)
	})
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// splitList parses "a,b,c" flags.
func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// versionString is the version and commit the build stamped into k8s.io/component-base/version
// (as in the other commands' --version; `make images` sets them).
func versionString() string {
	v := version.Get()
	return fmt.Sprintf("azsim %s (commit %s)", v.GitVersion, v.GitCommit)
}
