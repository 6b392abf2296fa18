package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/plan"
)

// The public IP list cache is kept current by the writes made here, so a burst of services
// lists each resource group once.

func (l *LoadBalancer) listPIPs(ctx context.Context, rg string) ([]*armnetwork.PublicIPAddress, error) {
	return l.opts.PublicIPs.Get(ctx, rg)
}

// refreshPIPs lists the public IPs of rg again unless the cached list is a few seconds old: a
// user's public IP named by a service may be newer than the cached list.
func (l *LoadBalancer) refreshPIPs(ctx context.Context, rg string) ([]*armnetwork.PublicIPAddress, error) {
	return l.opts.PublicIPs.Refresh(ctx, rg)
}

// pipWriting marks a write of public IP name as in flight; its done keeps the list cache in
// step with the write's result (pipWritten) and ends the mark.
func (l *LoadBalancer) pipWriting(rg, name string) (done func(stored *armnetwork.PublicIPAddress, err error)) {
	end := l.opts.PublicIPs.Writing(rg, name)
	return func(stored *armnetwork.PublicIPAddress, err error) {
		l.pipWritten(rg, name, stored, err)
		end()
	}
}

// pipWritten keeps the list cache in step with a write of public IP name (stored nil: deleted);
// after a failed write the list is dropped.
func (l *LoadBalancer) pipWritten(rg, name string, stored *armnetwork.PublicIPAddress, err error) {
	if err != nil {
		l.opts.PublicIPs.Invalidate(rg)
		return
	}
	l.opts.PublicIPs.Update(rg, func(items []*armnetwork.PublicIPAddress) []*armnetwork.PublicIPAddress {
		return replacePublicIP(items, name, stored)
	})
}

// replacePublicIP returns items with the public IP called name replaced by stored, appended when
// it is new, or removed when stored is nil. It does not modify items.
func replacePublicIP(items []*armnetwork.PublicIPAddress, name string, stored *armnetwork.PublicIPAddress) []*armnetwork.PublicIPAddress {
	out := make([]*armnetwork.PublicIPAddress, 0, len(items)+1)
	for _, p := range items {
		if p != nil && p.Name != nil && strings.EqualFold(*p.Name, name) {
			continue
		}
		out = append(out, p)
	}
	if stored != nil {
		out = append(out, stored)
	}
	return out
}

// pipETag is a listed public IP's ETag ("" for none).
func pipETag(p *armnetwork.PublicIPAddress) string {
	if p == nil {
		return ""
	}
	return str(p.Etag)
}

// pipGroups are the resource groups where public IPs of the service may be: the base groups,
// the recorded ones and the service's own (plan.PublicIPGroups).
func (l *LoadBalancer) pipGroups(ctx context.Context, s *plan.Service, extra ...string) []string {
	return plan.PublicIPGroups(l.cfg, l.opts.PIPGroups.Groups(ctx), append([]string{plan.PublicIPResourceGroup(l.cfg, s)}, extra...)...)
}

// listGroups lists the public IPs of every group (from the list cache). A group that does not
// exist holds none. A group that cannot be listed is skipped and named in the returned error,
// unless it is one of must: then listGroups fails. The callers go on without the skipped
// groups, so that a group they do not need (recorded long ago, its permission since removed)
// does not block a service: what is left there is released by a later reconcile or audit pass.
func (l *LoadBalancer) listGroups(ctx context.Context, groups []string, must []string) (listed []plan.ListedPIP, skipped, err error) {
	var errs []error
	for _, rg := range groups {
		items, lerr := l.listPIPs(ctx, rg)
		switch {
		case lerr == nil:
		case arm.IsNotFound(lerr):
			continue
		case slices.ContainsFunc(must, func(m string) bool { return strings.EqualFold(rg, m) }):
			return nil, nil, fmt.Errorf("public IPs of resource group %s: %w", rg, lerr)
		default:
			errs = append(errs, fmt.Errorf("public IPs of resource group %s: %w", rg, lerr))
			continue
		}
		for _, p := range items {
			if p != nil {
				listed = append(listed, plan.ListedPIP{RG: rg, PIP: p})
			}
		}
	}
	return listed, errors.Join(errs...), nil
}

// pipsIn are the listed public IPs of one group.
func pipsIn(listed []plan.ListedPIP, rg string) []*armnetwork.PublicIPAddress {
	var out []*armnetwork.PublicIPAddress
	for _, lp := range listed {
		if strings.EqualFold(lp.RG, rg) {
			out = append(out, lp.PIP)
		}
	}
	return out
}

// allPIPs are the listed public IPs.
func allPIPs(listed []plan.ListedPIP) []*armnetwork.PublicIPAddress {
	out := make([]*armnetwork.PublicIPAddress, 0, len(listed))
	for _, lp := range listed {
		out = append(out, lp.PIP)
	}
	return out
}
