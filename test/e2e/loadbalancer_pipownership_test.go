package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/pipgroups"
	"github.com/azure-ccm/azure-ccm/test/framework/azurenames"
)

// pipOwnershipArgs run the CCM without the drift audit: the service paths alone must release
// every public IP; the audit's sweep is tested on its own, with the audit on.
var pipOwnershipArgs = []string{"--drift-audit-period=0"}

// TestPublicIPOwnership: a public IP the CCM created is released once no service uses it,
// wherever it is and however the services named it — after a change of the resource-group
// annotation, when the last services sharing it leave (by address or by name), when the
// annotation changed while the CCM was down — and the drift audit releases owned public IPs
// whose services are gone. Each case starts from Kubernetes objects and checks every resource
// group of azsim.
func TestPublicIPOwnership(t *testing.T) {
	working(t)
	topo := lbTopology()
	topo.ResourceGroups = append(topo.ResourceGroups, "rg-more")
	l := lbStart(t, lbOptions{Topology: topo, CloudConfig: lbNodeIPConfig, CCMArgs: pipOwnershipArgs})
	t.Run("resource group change, then deletion", func(t *testing.T) { pipTestGroupChange(l.inNamespace(t, "pip-move")) })
	t.Run("shared IP released by its last services", func(t *testing.T) { pipTestShared(l.inNamespace(t, "pip-share")) })
	t.Run("annotation changed while the CCM is down", func(t *testing.T) { pipTestRestart(l.inNamespace(t, "pip-restart")) })
	t.Run("drift audit releases public IPs of gone services", func(t *testing.T) { pipTestSweep(l.inNamespace(t, "pip-audit")) })
}

// inNamespace is l for a subtest whose services live in a namespace of their own.
func (l *lbEnv) inNamespace(t *testing.T, ns string) *lbEnv {
	c := l.with(t)
	c.ns = ns
	if _, err := c.Kube.CoreV1().Namespaces().Create(lbCtx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return c
}

// svc is lbService in l's namespace.
func (l *lbEnv) svc(name string, ann map[string]string, ports ...corev1.ServicePort) *corev1.Service {
	s := lbService(name, ann, ports...)
	s.Namespace = l.ns
	return s
}

// deleteNamespace deletes l's namespace (and so its services) and waits until it is gone: the
// CCM removed every service's finalizer.
func (l *lbEnv) deleteNamespace() {
	l.t.Helper()
	if err := l.Kube.CoreV1().Namespaces().Delete(lbCtx(l.t), l.ns, metav1.DeleteOptions{}); err != nil {
		l.t.Fatal(err)
	}
	l.waitFor("namespace "+l.ns+" gone", func(ctx context.Context) (bool, error) {
		_, err := l.Kube.CoreV1().Namespaces().Get(ctx, l.ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		svcs, lerr := l.Kube.CoreV1().Services(l.ns).List(ctx, metav1.ListOptions{})
		if lerr == nil && len(svcs.Items) > 0 {
			return false, fmt.Errorf("%d services left (%s …)", len(svcs.Items), svcs.Items[0].Name)
		}
		return false, fmt.Errorf("namespace still there (err=%v)", err)
	}, 2*lbWait)
}

// ownedPIP is a public IP of azsim, in any resource group, that the cluster's tags claim.
type ownedPIP struct {
	rg, name, address, services string
}

func (p ownedPIP) String() string {
	return fmt.Sprintf("%s/%s (%s, services %q)", p.rg, p.name, p.address, p.services)
}

// ownedPIPs are the public IPs of every resource group that the cluster owns by their tags — its
// name tag, or (the legacy ownership) no cluster name tag and a service tag naming a service of
// namespace ns — read from azsim's state.
func (l *lbEnv) ownedPIPs(ctx context.Context, ns string) ([]ownedPIP, error) {
	all, err := l.Azsim.List(ctx, "Microsoft.Network/publicIPAddresses")
	if err != nil {
		return nil, err
	}
	var out []ownedPIP
	for _, p := range all {
		tags := map[string]*string{}
		if m, ok := p["tags"].(map[string]any); ok {
			for k, v := range m {
				tags[k] = to.Ptr(fmt.Sprint(v))
			}
		}
		cluster, hasCluster := azurenames.ClusterTagValue(tags)
		services, _ := azurenames.ServiceTagValue(tags)
		ofNS := slices.ContainsFunc(azurenames.ParseServiceTag(services), func(k string) bool { return strings.HasPrefix(k, ns+"/") })
		if !(hasCluster && strings.EqualFold(cluster, lbCluster)) && !(!hasCluster && ofNS) {
			continue
		}
		id, _ := p["id"].(string)
		props, _ := p["properties"].(map[string]any)
		addr, _ := props["ipAddress"].(string)
		out = append(out, ownedPIP{rg: segmentAfter(id, "resourceGroups"), name: fmt.Sprint(p["name"]), address: addr, services: services})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

func segmentAfter(id, key string) string {
	parts := strings.Split(id, "/")
	for i := 0; i+1 < len(parts); i++ {
		if strings.EqualFold(parts[i], key) {
			return parts[i+1]
		}
	}
	return ""
}

// waitNoOwnedPIP waits until no public IP of the cluster (by its tags) is left in any resource
// group.
func (l *lbEnv) waitNoOwnedPIP(what string) {
	l.t.Helper()
	l.waitFor(what+": no public IP of the cluster left in any resource group", func(ctx context.Context) (bool, error) {
		left, err := l.ownedPIPs(ctx, l.ns)
		if err != nil {
			return false, err
		}
		if len(left) > 0 {
			return false, fmt.Errorf("left: %v", left)
		}
		return true, nil
	}, lbWait)
}

// waitPIPGone waits until the public IP rg/name no longer exists.
func (l *lbEnv) waitPIPGone(what, rg, name string) {
	l.t.Helper()
	l.waitFor(what, func(ctx context.Context) (bool, error) {
		_, err := l.net.NewPublicIPAddressesClient().Get(ctx, rg, name, nil)
		switch {
		case err == nil:
			return false, fmt.Errorf("public IP %s/%s still exists", rg, name)
		case arm.IsNotFound(err):
			return true, nil
		}
		return false, err
	}, lbWait)
}

// waitIngress waits until the service shows exactly the address want.
func (l *lbEnv) waitIngress(name, want string) {
	l.t.Helper()
	l.waitFor("service "+name+" on "+want, func(ctx context.Context) (bool, error) {
		s, err := l.Kube.CoreV1().Services(l.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if got := ingressIPs(s); !slices.Equal(got, []string{want}) {
			return false, fmt.Errorf("ingress %v", got)
		}
		return true, nil
	}, lbWait)
}

// managedPIP returns the service's managed public IP rg/<cluster>-a<uid>, which must exist.
func (l *lbEnv) managedPIP(rg string, s *corev1.Service) *armnetwork.PublicIPAddress {
	l.t.Helper()
	name := azurenames.PublicIPName(lbCluster, azurenames.ServiceLBName(s.UID), "", false, azurenames.IPv4)
	p := l.pipExists(rg, name)
	if p == nil {
		l.t.FailNow()
	}
	eqs(l.t, name+" ingress", ingressIPs(s), []string{pipAddress(p)})
	return p
}

// checkUserPIPUntouched: a user's public IP is still there, with its address and no tag.
func (l *lbEnv) checkUserPIPUntouched(rg string, before *armnetwork.PublicIPAddress) {
	l.t.Helper()
	p := l.pipExists(rg, *before.Name)
	if p == nil {
		return
	}
	eq(l.t, *before.Name+" address", pipAddress(p), pipAddress(before))
	eq(l.t, *before.Name+" tags", len(p.Tags), len(before.Tags))
}

// pipTestGroupChange: services whose resource-group annotation moves them to a user's public
// IP in another group release the managed public IP of the group they leave — from the
// cluster's group to another one and back — and their deletion (with their namespace) leaves
// no public IP of the cluster anywhere.
func pipTestGroupChange(l *lbEnv) {
	userThere := l.userPIP("rg-pips", "user-move-there")
	userHere := l.userPIP(l.rg, "user-move-here")
	there := l.create(l.svc("there", nil))
	back := l.create(l.svc("back", map[string]string{annotations.ResourceGroup: "rg-pips"}))
	there, back = l.waitIP(there.Name), l.waitIP(back.Name)
	oldThere, oldBack := l.managedPIP(l.rg, there), l.managedPIP("rg-pips", back)

	l.update(there.Name, func(s *corev1.Service) {
		s.Annotations = map[string]string{annotations.ResourceGroup: "rg-pips", annotations.PIPName: *userThere.Name}
	})
	l.update(back.Name, func(s *corev1.Service) {
		s.Annotations = map[string]string{annotations.PIPName: *userHere.Name}
	})
	l.waitIngress(there.Name, pipAddress(userThere))
	l.waitIngress(back.Name, pipAddress(userHere))
	l.waitPIPGone("the managed public IP left in the cluster's group released", l.rg, *oldThere.Name)
	l.waitPIPGone("the managed public IP left in rg-pips released", "rg-pips", *oldBack.Name)

	l.deleteNamespace()
	l.waitNoOwnedPIP("after the services and their namespace were deleted")
	l.checkUserPIPUntouched("rg-pips", userThere)
	l.checkUserPIPUntouched(l.rg, userHere)
}

// pipTestShared: a managed public IP shared by services that name it by spec.loadBalancerIP and
// by azure-pip-name outlives the service that created it and is deleted when the last of them
// is.
func pipTestShared(l *lbEnv) {
	t := l.t
	owner := l.waitIP(l.create(l.svc("owner", nil, lbTCP(80))).Name)
	pip := l.managedPIP(l.rg, owner)
	byIP := l.svc("by-ip", nil, lbTCP(81))
	byIP.Spec.LoadBalancerIP = pipAddress(pip)
	l.create(byIP)
	l.create(l.svc("by-name", map[string]string{annotations.PIPName: *pip.Name}, lbTCP(82)))
	l.waitIngress("by-ip", pipAddress(pip))
	l.waitIngress("by-name", pipAddress(pip))
	l.waitFor("the shared public IP lists its three services", func(ctx context.Context) (bool, error) {
		left, err := l.ownedPIPs(ctx, l.ns)
		if err != nil {
			return false, err
		}
		want := sortStrings(l.ns+"/owner", l.ns+"/by-ip", l.ns+"/by-name")
		if len(left) != 1 || !slices.Equal(sortStrings(azurenames.ParseServiceTag(left[0].services)...), want) {
			return false, fmt.Errorf("owned public IPs %v, want one listing %s", left, want)
		}
		return true, nil
	}, lbWait)

	// The service that created it goes: the others keep it.
	if err := l.Kube.CoreV1().Services(l.ns).Delete(lbCtx(t), "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	l.waitFor("owner gone", func(ctx context.Context) (bool, error) {
		_, err := l.Kube.CoreV1().Services(l.ns).Get(ctx, "owner", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Errorf("owner still there (err=%v)", err)
	}, lbWait)
	if p := l.pipExists(l.rg, *pip.Name); p != nil {
		eq(t, "shared public IP kept for the services still on it", pipAddress(p), pipAddress(pip))
		services, _ := azurenames.ServiceTagValue(p.Tags)
		eqs(t, "its services", sortStrings(azurenames.ParseServiceTag(services)...), []string{l.ns + "/by-ip", l.ns + "/by-name"})
	}

	// The last services, which named it by address and by name, go: it is deleted.
	l.deleteNamespace()
	l.waitPIPGone("the shared managed public IP deleted with its last services", l.rg, *pip.Name)
	l.waitNoOwnedPIP("after the services sharing it were deleted")
}

// pipTestRestart: the CCM is down while services leave the resource group of their managed
// public IPs (one moves to the cluster's group, one to a user's public IP and is deleted):
// the CCM that starts afterwards, which no service tells about that group, releases both from
// its record of groups.
func pipTestRestart(l *lbEnv) {
	t := l.t
	user := l.userPIP("rg-pips", "user-restart")
	moved := l.create(l.svc("moved", map[string]string{annotations.ResourceGroup: "rg-more"}))
	gone := l.create(l.svc("gone", map[string]string{annotations.ResourceGroup: "rg-more"}))
	moved, gone = l.waitIP(moved.Name), l.waitIP(gone.Name)
	oldMoved, oldGone := l.managedPIP("rg-more", moved), l.managedPIP("rg-more", gone)

	if err := l.StopCCM(); err != nil {
		t.Fatal(err)
	}
	l.update(moved.Name, func(s *corev1.Service) { s.Annotations = nil })
	l.update(gone.Name, func(s *corev1.Service) {
		s.Annotations = map[string]string{annotations.ResourceGroup: "rg-pips", annotations.PIPName: *user.Name}
	})
	if err := l.Kube.CoreV1().Services(l.ns).Delete(lbCtx(t), gone.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	l.StartCCM(pipOwnershipArgs...)

	moved = l.waitIP(moved.Name)
	l.waitFor("moved to a new public IP in the cluster's group", func(ctx context.Context) (bool, error) {
		s, err := l.Kube.CoreV1().Services(l.ns).Get(ctx, moved.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		p, err := l.net.NewPublicIPAddressesClient().Get(ctx, l.rg, *oldMoved.Name, nil)
		if err != nil {
			return false, err
		}
		return slices.Equal(ingressIPs(s), []string{pipAddress(&p.PublicIPAddress)}), fmt.Errorf("ingress %v", ingressIPs(s))
	}, lbWait)
	l.waitPIPGone("the public IP moved's annotation no longer names released", "rg-more", *oldMoved.Name)
	l.waitPIPGone("the public IP of the service deleted meanwhile released", "rg-more", *oldGone.Name)

	l.deleteNamespace()
	l.waitNoOwnedPIP("after the services were deleted")
	l.checkUserPIPUntouched("rg-pips", user)
	// What the CCM that started found them by.
	cm, err := l.Kube.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(lbCtx(t), pipgroups.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the record of public IP groups: %v", err)
	}
	if !slices.Contains(pipgroups.Parse(cm.Data[pipgroups.DataKey]), "rg-more") {
		t.Errorf("rg-more not recorded: %q", cm.Data[pipgroups.DataKey])
	}
}

// pipTestSweep: public IPs owned by the cluster whose services are gone (as a deletion that
// could not reach their group, or an earlier version, leaves them) are released by the drift
// audit in every group where the cluster's public IPs may be, with an empty service list too;
// public IPs without the cluster's name tag (a user's tagged "service", another cluster's)
// and those of live services are left alone.
func pipTestSweep(l *lbEnv) {
	t := l.t
	live := l.waitIP(l.create(l.svc("live", map[string]string{annotations.ResourceGroup: "rg-more"})).Name)
	livePIP := l.managedPIP("rg-more", live)
	seed := func(rg, name string, tags map[string]string) *armnetwork.PublicIPAddress {
		p := l.userPIP(rg, name)
		tt := map[string]*string{}
		for k, v := range tags {
			tt[k] = to.Ptr(v)
		}
		if _, err := l.net.NewPublicIPAddressesClient().UpdateTags(lbCtx(t), rg, name, armnetwork.TagsObject{Tags: tt}, nil); err != nil {
			t.Fatalf("tag public IP %s/%s: %v", rg, name, err)
		}
		return p
	}
	leftGone := seed("rg-more", "left-by-gone-service", map[string]string{azurenames.TagService: l.ns + "/deleted," + l.ns + "/also-deleted",
		azurenames.TagClusterName: lbCluster})
	leftEmpty := seed(l.rg, "left-untagged", map[string]string{azurenames.TagService: "", azurenames.TagClusterName: lbCluster})
	notOurs := map[string]map[string]string{
		"users-tagged":  {"service": "frontend"},
		"other-cluster": {azurenames.TagService: l.ns + "/deleted", azurenames.TagClusterName: "other"},
	}
	for name, tags := range notOurs {
		seed(l.rg, name, tags)
	}

	if err := l.StopCCM(); err != nil {
		t.Fatal(err)
	}
	l.StartCCM("--drift-audit-period=2s")
	l.waitPIPGone("public IP of gone services released in rg-more", "rg-more", *leftGone.Name)
	l.waitPIPGone("public IP with no service released in the cluster's group", l.rg, *leftEmpty.Name)
	for name, tags := range notOurs {
		if got := l.pipExists(l.rg, name); got != nil && len(got.Tags) != len(tags) {
			t.Errorf("%s: tags changed: %v", name, got.Tags)
		}
	}
	if got := l.pipExists("rg-more", *livePIP.Name); got != nil {
		services, _ := azurenames.ServiceTagValue(got.Tags)
		eq(t, "the live service's public IP", services, l.ns+"/live")
	}
	l.deleteNamespace()
	l.waitNoOwnedPIP("after the live service was deleted")
}
