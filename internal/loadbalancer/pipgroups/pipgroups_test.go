package pipgroups

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

const ns = "kube-system"

func TestParseFormat(t *testing.T) {
	if got := Parse("rg-b\n\n  RG-a \nrg-A\nrg-b\n"); strings.Join(got, ",") != "rg-b,RG-a" {
		t.Fatalf("Parse: %v", got)
	}
	if got := Format([]string{"rg-b", "RG-a", "rg-c"}); got != "RG-a\nrg-b\nrg-c" {
		t.Fatalf("Format: %q", got)
	}
}

func stored(t *testing.T, kube *fake.Clientset) string {
	t.Helper()
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(context.Background(), Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm.Data[DataKey]
}

// TestConfigMapSurvivesRestart: groups added by one process are the groups of the next.
func TestConfigMapSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	first := NewConfigMap(kube, ns)
	if got := first.Groups(ctx); len(got) != 0 {
		t.Fatalf("groups before any record: %v", got)
	}
	for _, rg := range []string{"rg-b", "rg-a", "RG-B", ""} {
		if err := first.Add(ctx, rg); err != nil {
			t.Fatal(err)
		}
	}
	if got := stored(t, kube); got != "rg-a\nrg-b" {
		t.Fatalf("stored %q", got)
	}
	writes := 0
	for _, a := range kube.Actions() {
		if a.GetVerb() == "create" || a.GetVerb() == "update" {
			writes++
		}
	}
	if writes != 2 {
		t.Fatalf("%d writes for two new groups", writes)
	}
	second := NewConfigMap(kube, ns)
	if got := strings.Join(second.Groups(ctx), ","); got != "rg-b,rg-a" && got != "rg-a,rg-b" {
		t.Fatalf("after restart: %s", got)
	}
	kube.ClearActions()
	if err := second.Add(ctx, "rg-a"); err != nil || len(kube.Actions()) != 0 {
		t.Fatalf("re-adding a recorded group: %v, %d calls", err, len(kube.Actions()))
	}
}

// TestConfigMapMergesConcurrentWrites: a conflict re-reads and keeps the other writer's groups.
func TestConfigMapMergesConcurrentWrites(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: Name, Namespace: ns, ResourceVersion: "1"},
		Data: map[string]string{DataKey: "rg-old"}})
	conflicts := 1
	kube.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts == 0 {
			return false, nil, nil
		}
		conflicts--
		// Someone else recorded rg-other meanwhile.
		cm, _ := kube.Tracker().Get(corev1.SchemeGroupVersion.WithResource("configmaps"), ns, Name)
		c := cm.(*corev1.ConfigMap).DeepCopy()
		c.Data[DataKey] = "rg-old\nrg-other"
		_ = kube.Tracker().Update(corev1.SchemeGroupVersion.WithResource("configmaps"), c, ns)
		return true, nil, apierrors.NewConflict(corev1.Resource("configmaps"), Name, errors.New("changed"))
	})
	r := NewConfigMap(kube, ns)
	if err := r.Add(ctx, "rg-new"); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, kube); got != "rg-new\nrg-old\nrg-other" {
		t.Fatalf("stored %q", got)
	}
	if got := Format(r.Groups(ctx)); got != "rg-new\nrg-old\nrg-other" {
		t.Fatalf("groups %q", got)
	}
}

// TestConfigMapReadFailure: until the ConfigMap can be read, the groups this process added are
// known; the read is tried again after a while, not on every call.
func TestConfigMapReadFailure(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: Name, Namespace: ns},
		Data: map[string]string{DataKey: "rg-old"}})
	failing := true
	gets := 0
	kube.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		gets++
		if failing {
			return true, nil, apierrors.NewForbidden(corev1.Resource("configmaps"), Name, errors.New("no"))
		}
		return false, nil, nil
	})
	now := time.Unix(1000, 0)
	r := NewConfigMap(kube, ns)
	r.now = func() time.Time { return now }
	if got := r.Groups(ctx); len(got) != 0 {
		t.Fatalf("groups %v", got)
	}
	r.Groups(ctx)
	if gets != 1 {
		t.Fatalf("%d reads within the retry period", gets)
	}
	if err := r.Add(ctx, "rg-new"); err == nil || !strings.Contains(err.Error(), "rg-new") {
		t.Fatalf("Add with a failing API: %v", err)
	}
	failing = false
	now = now.Add(retryLoad)
	if got := Format(r.Groups(ctx)); got != "rg-old" {
		t.Fatalf("groups after the read: %q", got)
	}
}

func TestMemoryAndReadOnly(t *testing.T) {
	ctx := context.Background()
	m := &Memory{}
	_ = m.Add(ctx, "rg-a")
	_ = m.Add(ctx, "RG-A")
	ro := ReadOnly{R: m}
	if err := ro.Add(ctx, "rg-b"); err != nil {
		t.Fatal(err)
	}
	if got := Format(ro.Groups(ctx)); got != "rg-a" {
		t.Fatalf("groups %q", got)
	}
}
