package chaos

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/internal/azureid"
)

// observe journals, every interval until ctx ends, each change of who holds which address:
// services' status IPs, load balancer frontends' private/public IP references and the NSG's
// managed destinations with their ports. With the operations already in the journal, this is
// what makes an invariant failure explainable after the fact.
func (r *run) observe(ctx context.Context, nsgID string, interval time.Duration) {
	last := map[string]string{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
		now := map[string]string{}
		if svcs, err := r.e.Kube.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{}); err == nil {
			for _, s := range svcs.Items {
				var ips []string
				for _, in := range s.Status.LoadBalancer.Ingress {
					ips = append(ips, in.IP)
				}
				del := ""
				if s.DeletionTimestamp != nil {
					del = " (deleting)"
				}
				now["status "+s.Name] = strings.Join(ips, ",") + del
			}
		}
		if lbs, err := r.e.Azsim.List(ctx, "Microsoft.Network/loadBalancers"); err == nil {
			for _, lb := range lbs {
				for _, fe := range arr(lb, "properties", "frontendIPConfigurations") {
					p := obj(fe, "properties")
					now["frontend "+str(lb, "name")+"/"+str(fe, "name")] = str(p, "privateIPAddress") + pipName(str(p, "publicIPAddress", "id"))
				}
			}
		}
		if nsg, err := r.e.Azsim.Get(ctx, nsgID); err == nil {
			for _, rule := range arr(nsg, "properties", "securityRules") {
				p := obj(rule, "properties")
				dsts := listOrOne(p, "destinationAddressPrefixes", "destinationAddressPrefix")
				now["nsg "+str(rule, "name")] = fmt.Sprintf("%v ports %v", dsts, listOrOne(p, "destinationPortRanges", "destinationPortRange"))
			}
		}
		var changes []string
		for _, k := range slices.Sorted(maps.Keys(now)) {
			if last[k] != now[k] {
				changes = append(changes, k+" = "+now[k])
			}
		}
		for _, k := range slices.Sorted(maps.Keys(last)) {
			if _, ok := now[k]; !ok {
				changes = append(changes, k+" gone")
			}
		}
		for _, c := range changes {
			r.journal("state %s", c)
		}
		last = now
	}
}

// pipName names a frontend's public IP in the journal ("" for none).
func pipName(id string) string {
	if id == "" {
		return ""
	}
	return "pip:" + azureid.Name(id)
}
