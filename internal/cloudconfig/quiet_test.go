package cloudconfig

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// TestSecretNotLoggedAtHighVerbosity: at -v=10 client-go logs every response body it reads;
// the cloud config Secret, read from an API server, must not appear in the log, neither as its
// value nor base64-encoded as the API carries it.
func TestSecretNotLoggedAtHighVerbosity(t *testing.T) {
	const secretValue = "cloud-config-client-secret-5f1e9a"
	doc := minimal + `, "aadClientSecret": "` + secretValue + `"}`
	sec := v1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: DefaultSecretNamespace, Name: DefaultSecretName},
		Data:       map[string][]byte{SecretKey: []byte(doc)}}
	body, err := json.Marshal(sec)
	if err != nil {
		t.Fatal(err)
	}
	served := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/namespaces/kube-system/secrets/azure-cloud-provider" {
			http.NotFound(w, r)
			return
		}
		served++
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	defer srv.Close()

	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	for k, v := range map[string]string{"logtostderr": "false", "v": "10"} {
		if err := fs.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	klog.SetOutput(&buf)
	defer func() {
		klog.Flush()
		for k, v := range map[string]string{"logtostderr": "true", "v": "0"} {
			if err := fs.Set(k, v); err != nil {
				t.Error(err)
			}
		}
	}()

	// client-go adds its debugging transport when the client is built, if -v is 6 or more.
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	src := Source{Namespace: DefaultSecretNamespace, Name: DefaultSecretName, Kube: kube}
	l, err := src.Load(context.Background())
	klog.Flush()
	if err != nil {
		t.Fatal(err)
	}
	if served != 1 || l.Config.AADClientSecret.Value() != secretValue {
		t.Fatalf("served %d times, secret read %v: the Secret did not come from the server", served, l.Config.AADClientSecret.Value() == secretValue)
	}
	out := buf.String()
	if !strings.Contains(out, "/api/v1/namespaces/kube-system/secrets/azure-cloud-provider") {
		t.Fatalf("the request is not in the log at -v=10, so the log was not captured: %q", out)
	}
	for what, v := range map[string]string{"value": secretValue, "base64 of the document": base64.StdEncoding.EncodeToString([]byte(doc))[:40]} {
		if strings.Contains(out, v) {
			t.Errorf("the Secret's %s is in the log:\n%s", what, out)
		}
	}
}
