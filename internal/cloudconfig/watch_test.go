package cloudconfig

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/testutil"
)

func TestWatcherAppliesValidAndRefusesInvalidSecretChanges(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sec := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultSecretNamespace, Name: DefaultSecretName},
		Data: map[string][]byte{SecretKey: []byte(minimal + `, "tags": "env=a"}`)}}
	kube := fake.NewClientset(sec)
	src := Source{Namespace: DefaultSecretNamespace, Name: DefaultSecretName, Kube: kube}
	first, err := src.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	applied := make(chan string, 10)
	failNext := false
	rec := record.NewFakeRecorder(10)
	w := &Watcher{Source: src, Recorder: rec, WatchSecret: true, Apply: func(_ context.Context, l Loaded) error {
		if failNext {
			return errors.New("login failed")
		}
		applied <- l.Config.Tags
		return nil
	}}
	before := map[string]float64{}
	for _, r := range []string{ResultSuccess, ResultInvalid, ResultFailed} {
		before[r], _ = testutil.GetCounterMetricValue(reloads.WithLabelValues(r))
	}
	go w.Run(ctx, first.Data)

	update := func(doc string) {
		t.Helper()
		s, err := kube.CoreV1().Secrets(DefaultSecretNamespace).Get(ctx, DefaultSecretName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Data[SecretKey] = []byte(doc)
		if _, err := kube.CoreV1().Secrets(DefaultSecretNamespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	event := func() string {
		t.Helper()
		select {
		case e := <-rec.Events:
			return e
		case <-time.After(10 * time.Second):
			t.Fatal("no event")
		}
		return ""
	}

	update(minimal + `, "tags": "env=b"}`)
	select {
	case tags := <-applied:
		if tags != "env=b" {
			t.Errorf("applied tags %q", tags)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("valid change not applied")
	}
	if e := event(); !strings.HasPrefix(e, "Normal "+ReasonReloaded) {
		t.Errorf("event %q", e)
	}

	update(minimal + `, "tags": "env=c", "vmType": "vmas"}`)
	if e := event(); !strings.HasPrefix(e, "Warning "+ReasonInvalid) || !strings.Contains(e, `vmType: "vmas"`) {
		t.Errorf("event %q: want CloudConfigInvalid naming vmType", e)
	}

	failNext = true
	update(minimal + `, "tags": "env=d"}`)
	if e := event(); !strings.HasPrefix(e, "Warning "+ReasonReloadFailed) || !strings.Contains(e, "login failed") {
		t.Errorf("event %q", e)
	}
	select {
	case tags := <-applied:
		t.Errorf("applied %q after an invalid or failed change", tags)
	default:
	}
	for r, want := range map[string]float64{ResultSuccess: 1, ResultInvalid: 1, ResultFailed: 1} {
		got, _ := testutil.GetCounterMetricValue(reloads.WithLabelValues(r))
		if got-before[r] != want {
			t.Errorf("reloads{result=%s} grew by %v, want %v", r, got-before[r], want)
		}
	}
}
