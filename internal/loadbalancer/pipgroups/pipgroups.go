// Package pipgroups keeps the record of the resource groups the CCM has written public IPs in,
// other than the groups it always looks in (plan.BaseGroups). A service names the group of its
// public IPs with an annotation that may change, or go with the service, at any time, also
// while the CCM is down: the record is what still finds a managed public IP in a group that
// no service names any more, so that it is released. It is a ConfigMap, written before the
// first public IP write in a new group and never shrunk, so it survives restarts and leader
// changes.
package pipgroups

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
)

// Name is the ConfigMap holding the record (in the CCM's namespace, that of its leader
// election lease).
const Name = "azure-ccm-public-ip-resource-groups"

// DataKey holds the groups, one per line, sorted.
const DataKey = "resourceGroups"

// Record is the durable set of resource groups the CCM wrote public IPs in.
type Record interface {
	// Groups are the recorded groups, those of earlier processes included.
	Groups(ctx context.Context) []string
	// Add records the group, and returns once it is durable (at once when it already is).
	Add(ctx context.Context, rg string) error
}

// Parse reads the groups of the ConfigMap's data value: one per line, blanks ignored, each
// once (case-insensitively: resource group names are).
func Parse(v string) []string {
	var out []string
	for _, l := range strings.Split(v, "\n") {
		if l = strings.TrimSpace(l); l != "" && !containsFold(out, l) {
			out = append(out, l)
		}
	}
	return out
}

// Format writes groups as the data value, sorted case-insensitively.
func Format(groups []string) string {
	g := slices.Clone(groups)
	sort.SliceStable(g, func(i, j int) bool { return strings.ToLower(g[i]) < strings.ToLower(g[j]) })
	return strings.Join(g, "\n")
}

func containsFold(list []string, s string) bool {
	return slices.ContainsFunc(list, func(o string) bool { return strings.EqualFold(o, s) })
}

// retryLoad is how long after a failed read of the ConfigMap the next one is tried.
const retryLoad = 30 * time.Second

// ConfigMap is the Record kept in a ConfigMap. It reads the ConfigMap once and then keeps the
// set in memory: the CCM that holds the leadership is its only writer.
type ConfigMap struct {
	kube      kubernetes.Interface
	namespace string
	now       func() time.Time

	mu      sync.Mutex
	groups  []string
	loaded  bool
	lastTry time.Time
}

// NewConfigMap returns the record kept in the ConfigMap Name of namespace.
func NewConfigMap(kube kubernetes.Interface, namespace string) *ConfigMap {
	return &ConfigMap{kube: kube, namespace: namespace, now: time.Now}
}

// Groups implements Record. Until the ConfigMap could be read (it is read again at most every
// 30 s after a failure, which is logged) only the groups added by this process are known:
// the callers still look in the base groups and the groups services name, and find the rest
// once the read succeeds.
func (c *ConfigMap) Groups(ctx context.Context) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.loaded && c.now().Sub(c.lastTry) >= retryLoad {
		c.lastTry = c.now()
		cm, err := c.kube.CoreV1().ConfigMaps(c.namespace).Get(ctx, Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			c.loaded = true
		case err != nil:
			klog.ErrorS(err, "Reading the record of public IP resource groups; public IPs in groups no service names now are not looked for until it is read",
				"configMap", c.namespace+"/"+Name)
		default:
			c.merge(Parse(cm.Data[DataKey]))
			c.loaded = true
		}
	}
	return slices.Clone(c.groups)
}

// Add implements Record: the group is written to the ConfigMap (created when missing) before
// Add returns nil.
func (c *ConfigMap) Add(ctx context.Context, rg string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rg == "" || containsFold(c.groups, rg) {
		return nil
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cms := c.kube.CoreV1().ConfigMaps(c.namespace)
		cm, err := cms.Get(ctx, Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			groups := append(slices.Clone(c.groups), rg)
			_, err = cms.Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: Name, Namespace: c.namespace,
					Labels: map[string]string{"app.kubernetes.io/part-of": "azure-ccm"},
					Annotations: map[string]string{"azure-ccm/description": "Resource groups the cloud controller manager wrote public IPs in: " +
						"it looks for the public IPs it manages there, to release them once unused. Do not edit."}},
				Data: map[string]string{DataKey: Format(groups)},
			}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				// Created meanwhile: read it and merge, as on a conflict.
				return apierrors.NewConflict(corev1.Resource("configmaps"), Name, err)
			}
			if err == nil {
				c.groups, c.loaded = groups, true
			}
			return err
		}
		if err != nil {
			return err
		}
		have := Parse(cm.Data[DataKey])
		c.merge(have)
		c.loaded = true
		if containsFold(have, rg) {
			return nil
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[DataKey] = Format(append(have, rg))
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			return err
		}
		c.merge([]string{rg})
		return nil
	})
	if err != nil {
		return fmt.Errorf("recording resource group %s in ConfigMap %s/%s (the CCM looks for its public IPs there once no service names it): %w",
			rg, c.namespace, Name, err)
	}
	klog.InfoS("Recorded a resource group of public IPs", "resourceGroup", rg, "configMap", c.namespace+"/"+Name)
	return nil
}

func (c *ConfigMap) merge(groups []string) {
	for _, g := range groups {
		if !containsFold(c.groups, g) {
			c.groups = append(c.groups, g)
		}
	}
}

// Memory is a Record of one process (tests, and callers without an API server).
type Memory struct {
	mu     sync.Mutex
	groups []string
}

// Groups implements Record.
func (m *Memory) Groups(context.Context) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.groups)
}

// Add implements Record.
func (m *Memory) Add(_ context.Context, rg string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rg != "" && !containsFold(m.groups, rg) {
		m.groups = append(m.groups, rg)
	}
	return nil
}

// ReadOnly is r seen by a dry run: its groups, and Add records nothing (the dry run writes no
// public IP, so there is nothing to find later).
type ReadOnly struct{ R Record }

// Groups implements Record.
func (r ReadOnly) Groups(ctx context.Context) []string { return r.R.Groups(ctx) }

// Add implements Record.
func (ReadOnly) Add(context.Context, string) error { return nil }
