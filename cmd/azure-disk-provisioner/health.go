package main

import (
	"fmt"
	"net/http"
	"sort"
	"time"

	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/tools/leaderelection"
)

// leaderHealthTolerance is how long past its renew deadline a leader may go without renewing
// before /healthz fails (kube-controller-manager uses the same 20 s).
const leaderHealthTolerance = 20 * time.Second

// health is what /healthz checks: the informers the provisioner works from have synced (a
// provisioner whose watches never came up serves nothing), and a leader still renews its Lease.
// ARM is not checked: an Azure outage must not restart the process.
type health struct {
	synced map[string]func() bool
	leader *leaderelection.HealthzAdaptor
}

func newHealth(leaderElect bool) *health {
	h := &health{synced: map[string]func() bool{}}
	if leaderElect {
		h.leader = leaderelection.NewLeaderHealthzAdaptor(leaderHealthTolerance)
	}
	return h
}

// addSynced adds an informer's HasSynced under a name.
func (h *health) addSynced(name string, hasSynced func() bool) { h.synced[name] = hasSynced }

// checks are the /healthz checks (each also served at /healthz/<name>).
func (h *health) checks() []healthz.HealthChecker {
	out := []healthz.HealthChecker{healthz.PingHealthz, healthz.NamedCheck("informer-sync", h.informersSynced)}
	if h.leader != nil {
		out = append(out, h.leader)
	}
	return out
}

func (h *health) informersSynced(*http.Request) error {
	var waiting []string
	for name, synced := range h.synced {
		if !synced() {
			waiting = append(waiting, name)
		}
	}
	if len(waiting) > 0 {
		sort.Strings(waiting)
		return fmt.Errorf("informers not synced yet: %v", waiting)
	}
	return nil
}
