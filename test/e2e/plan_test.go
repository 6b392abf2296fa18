package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/deploy/azure"
	"github.com/azure-ccm/azure-ccm/internal/azsim/drift"
	"github.com/azure-ccm/azure-ccm/internal/changes"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/internal/writeplan"
	"github.com/azure-ccm/azure-ccm/test/framework/azurenames"
)

// planRun is one run of `azure-cloud-controller-manager plan`.
type planRun struct {
	code        int
	out, stderr string
	plan        writeplan.Plan
	writes      map[string]int64
}

// plan runs the plan command against the environment (CCM flags as the framework passes them)
// and checks what it must never do: write to Azure, call ARM outside the read-only role, or
// write to the cluster.
func (l *lbEnv) plan(output string) planRun {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := l.Azsim.ResetStats(ctx); err != nil {
		l.t.Fatal(err)
	}
	rvs := l.clusterVersions(ctx)
	cmd := exec.CommandContext(ctx, l.CCMBinary(), "plan", "--cloud-provider=azure", "--cloud-config="+l.CloudConfigPath,
		"--kubeconfig="+l.Kubeconfig, "--configure-cloud-routes=false", "--allocate-node-cidrs=false", "--leader-elect=false",
		"--output="+output)
	cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+l.Azure.CAFile)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := planRun{out: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		l.t.Fatalf("plan: %v\n%s", err, stderr.String())
	}
	if r.code == 1 {
		l.t.Fatalf("plan failed:\n%s\n%s", stdout.String(), stderr.String())
	}
	if output == "json" {
		if err := json.Unmarshal(stdout.Bytes(), &r.plan); err != nil {
			l.t.Fatalf("plan output is not JSON: %v\n%s", err, stdout.String())
		}
	}
	st := l.stats()
	r.writes = writesByResource(st)
	if len(r.writes) != 0 {
		l.t.Errorf("the plan wrote to Azure: %v", r.writes)
	}
	role, err := azure.Load("azure-ccm-plan-role.json")
	if err != nil {
		l.t.Fatal(err)
	}
	// Every role action azsim saw needed since the reset is the plan's (the CCM is not running).
	for _, a := range st.RoleActions {
		if !role.Allows(a.Action) {
			l.t.Errorf("the plan (%s) needed %s, which the read-only plan role does not allow", a.Client, a.Action)
		}
	}
	if after := l.clusterVersions(ctx); after != rvs {
		l.t.Errorf("the plan wrote to the cluster: resource versions\n%s\nbecame\n%s", rvs, after)
	}
	return r
}

// clusterVersions are the resource versions of the services and nodes and the number of
// events: the plan must change none.
func (l *lbEnv) clusterVersions(ctx context.Context) string {
	l.t.Helper()
	svcs, err := l.Kube.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		l.t.Fatal(err)
	}
	nodes, err := l.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		l.t.Fatal(err)
	}
	evs, err := l.Kube.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Service"})
	if err != nil {
		l.t.Fatal(err)
	}
	var parts []string
	for _, s := range svcs.Items {
		parts = append(parts, "service "+s.Namespace+"/"+s.Name+"@"+s.ResourceVersion)
	}
	for _, n := range nodes.Items {
		// Taints under node.kubernetes.io/ are the node lifecycle's (kube-controller-manager):
		// they come and go with kwok's heartbeats while the plan runs.
		var taints []string
		for _, t := range n.Spec.Taints {
			if !strings.HasPrefix(t.Key, "node.kubernetes.io/") {
				taints = append(taints, t.ToString())
			}
		}
		parts = append(parts, "node "+n.Name+" "+strings.Join(n.Finalizers, ",")+" "+strings.Join(taints, ","))
	}
	sort.Strings(parts)
	return strings.Join(parts, "\n") + fmt.Sprintf("\nservice events: %d", len(evs.Items))
}

// planLines are the plan's changes as "<type> <name>: <actor>: <change>", sorted.
func planLines(p writeplan.Plan) []string {
	var out []string
	for _, r := range p.Resources {
		for _, w := range r.Writes {
			actor := w.Actor
			if w.Child != "" {
				actor += " [pool " + w.Child + "]"
			}
			if w.Op == "delete" || w.Op == "create" {
				out = append(out, fmt.Sprintf("%s %s: %s: %s", r.Type[strings.LastIndex(r.Type, "/")+1:], r.Name, actor, w.Op))
				continue
			}
			for _, c := range w.Changes {
				out = append(out, fmt.Sprintf("%s %s: %s: %s", r.Type[strings.LastIndex(r.Type, "/")+1:], r.Name, actor, changes.Describe(c)))
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestPlan: the plan of a cluster the CCM converged is "no changes" (exit 0); after each kind
// of third-party edit it lists exactly that repair (exit 2); with services created while the
// CCM was stopped it lists their creations and reports the one with an invalid annotation; no
// plan run writes to Azure or to the cluster, or calls ARM outside the read-only role.
func TestPlan(t *testing.T) {
	working(t)
	l := lbStart(t, lbOptions{CloudConfig: lbNodeIPConfig})
	const n = 6
	svcs := l.createServices("plan", n)
	if err := l.StopCCM(); err != nil {
		t.Fatal(err)
	}

	r := l.plan("text")
	if r.code != 0 || !strings.Contains(r.out, "No changes.") {
		t.Fatalf("plan of a converged cluster: exit %d\n%s\n%s", r.code, r.out, r.stderr)
	}
	t.Logf("converged:\n%s", r.out)

	lbID := l.lbID(lbCluster)
	nsgID := "/subscriptions/" + l.Azure.SubscriptionID + "/resourceGroups/" + l.rg + "/providers/Microsoft.Network/networkSecurityGroups/" + l.Azure.SecurityGroupName
	lbName := func(i int) string { return azurenames.ServiceLBName(svcs[i].UID) }
	actor := func(i int) string { return "service default/" + svcs[i].Name }
	rule2 := nsgRulesTo(l.mustState().NSG, ingressIPs(svcs[2])[0])
	if len(rule2) != 1 {
		t.Fatalf("NSG rules of %s: %v", svcs[2].Name, rule2)
	}
	node1 := l.Machines[1].NodeName
	for _, c := range []struct {
		name string
		req  drift.Request
		want []string
	}{
		{"rule deleted", drift.Request{Kind: drift.DeleteRule, Resource: lbID, Name: lbName(0) + "-TCP-8000"},
			[]string{"loadBalancers kubernetes: " + actor(0) + ": loadBalancingRules " + lbName(0) + "-TCP-8000 added"}},
		{"probe changed", drift.Request{Kind: drift.ChangeProbe, Resource: lbID, Name: lbName(1) + "-TCP-8001", IntervalInSeconds: 15},
			[]string{"loadBalancers kubernetes: " + actor(1) + ": probes " + lbName(1) + "-TCP-8001 changed (properties.intervalInSeconds 15 → 5)"}},
		{"NSG rule removed", drift.Request{Kind: drift.RemoveNSGRule, Resource: nsgID, Name: rule2[0]},
			[]string{"networkSecurityGroups " + l.Azure.SecurityGroupName + ": " + actor(2) + ": securityRules " + rule2[0] + " added"}},
		{"pool member removed", drift.Request{Kind: drift.RemovePoolMember, Resource: lbID, Pool: lbCluster, Name: l.Machines[1].InternalIPs[0]},
			// The first service planned syncs the shared pool.
			[]string{"loadBalancers kubernetes: " + actor(0) + " [pool kubernetes]: backendAddressPools kubernetes changed (properties.loadBalancerBackendAddresses[" + node1 + "] = added)"}},
		{"frontend public IP changed", drift.Request{Kind: drift.ChangeFrontendIP, Resource: lbID, Name: lbName(4)},
			[]string{"loadBalancers kubernetes: " + actor(4) + ": frontendIPConfigurations " + lbName(4) + " changed (properties.publicIPAddress.id Microsoft.Network/publicIPAddresses/" +
				lbName(4) + "-drift → Microsoft.Network/publicIPAddresses/" + lbCluster + "-" + lbName(4) + ")"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := l.with(t)
			if _, err := l.Azsim.Drift(lbCtx(t), c.req); err != nil {
				t.Fatal(err)
			}
			r := l.plan("json")
			if got := planLines(r.plan); r.code != 2 || strings.Join(got, "\n") != strings.Join(c.want, "\n") || len(r.plan.Problems) != 0 {
				t.Errorf("exit %d, plan:\n%s\nwant:\n%s\nproblems %v", r.code, strings.Join(got, "\n"), strings.Join(c.want, "\n"), r.plan.Problems)
			}
			// The CCM repairs it at start (the service controller ensures every service), and the
			// plan is empty again.
			l.StartCCM()
			l.waitFor("the plan empty again", func(ctx context.Context) (bool, error) {
				r := l.planQuiet()
				return r == 0, fmt.Errorf("plan exit %d", r)
			}, lbWait)
			if err := l.StopCCM(); err != nil {
				t.Fatal(err)
			}
		})
	}

	// Created while the CCM was stopped: one service to create, one with an invalid annotation.
	added := l.create(lbService("plan-new", nil, lbTCP(8100)))
	l.create(lbService("plan-bad", map[string]string{annotations.TCPIdleTimeout: "1000"}, lbTCP(8101)))
	r = l.plan("json")
	newLB := azurenames.ServiceLBName(added.UID)
	pip := lbCluster + "-" + newLB
	want := []string{
		"loadBalancers kubernetes: service default/plan-new: frontendIPConfigurations " + newLB + " added",
		"loadBalancers kubernetes: service default/plan-new: loadBalancingRules " + newLB + "-TCP-8100 added",
		"loadBalancers kubernetes: service default/plan-new: probes " + newLB + "-TCP-8100 added",
		"networkSecurityGroups " + l.Azure.SecurityGroupName + ": service default/plan-new: securityRules ",
		"publicIPAddresses " + pip + ": service default/plan-new: create",
	}
	got := planLines(r.plan)
	ok := r.code == 2 && len(got) == len(want)
	for i := range want {
		ok = ok && i < len(got) && strings.HasPrefix(got[i], want[i])
	}
	if !ok {
		t.Errorf("exit %d, plan:\n%s\nwant (prefixes):\n%s", r.code, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(r.plan.Problems) != 1 || r.plan.Problems[0].Actor != "service default/plan-bad" || r.plan.Problems[0].Reason != "InvalidAnnotation" ||
		!strings.Contains(r.plan.Problems[0].Message, annotations.TCPIdleTimeout) {
		t.Errorf("problems %+v, want the invalid annotation of plan-bad", r.plan.Problems)
	}
	if len(r.plan.Placeholders) == 0 {
		b, _ := json.MarshalIndent(r.plan.Resources, "", " ")
		t.Errorf("the new public IP's address is not named as a placeholder; planned writes:\n%s", b)
	}
	text := l.plan("text")
	t.Logf("services added while the CCM was stopped:\n%s", text.out)
	for _, s := range []string{"+ create Microsoft.Network/publicIPAddresses " + pip, "<address of new public IP " + pip + ">",
		"! service default/plan-bad: InvalidAnnotation", "Plan: 1 to create, 2 to update, 0 to delete; 1 problem."} {
		if !strings.Contains(text.out, s) {
			t.Errorf("the text plan lacks %q", s)
		}
	}
}

// planQuiet runs the plan and returns its exit code (for waits; no checks).
func (l *lbEnv) planQuiet() int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, l.CCMBinary(), "plan", "--cloud-config="+l.CloudConfigPath, "--kubeconfig="+l.Kubeconfig,
		"--configure-cloud-routes=false")
	cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+l.Azure.CAFile)
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
