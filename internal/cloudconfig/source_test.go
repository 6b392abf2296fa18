package cloudconfig

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/azure-ccm/azure-ccm/internal/cloudconfig/sources"
)

const minimal = `{"subscriptionId": "sub", "resourceGroup": "rg", "location": "westeurope", "useManagedIdentityExtension": true`

func TestLoadSecretOverFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "azure.json")
	if err := os.WriteFile(file, []byte(minimal+`, "cloudConfigType": "merge", "tags": "env=file"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	sec := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultSecretNamespace, Name: DefaultSecretName},
		Data: map[string][]byte{SecretKey: []byte(`{"tags": "env=secret"}`)}}
	src := Source{File: file, Namespace: DefaultSecretNamespace, Name: DefaultSecretName, Kube: fake.NewClientset(sec)}
	l, err := src.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if l.Config.Tags != "env=secret" || l.Secret == nil || l.Type != sources.TypeMerge || !l.TypeSet {
		t.Errorf("tags %q secret %v type %q (set %v): want the Secret's tags in merge mode", l.Config.Tags, l.Secret != nil, l.Type, l.TypeSet)
	}
	if !strings.Contains(l.Origin, "file ") || !strings.Contains(l.Origin, "secret kube-system/azure-cloud-provider") {
		t.Errorf("origin %q", l.Origin)
	}
	if !strings.Contains(l.SecretNote, "merged over the file") {
		t.Errorf("secret note %q", l.SecretNote)
	}

	// An invalid Secret is refused with the key named, and the Secret returned for the event.
	sec.Data[SecretKey] = []byte(`{"loadBalancerSku": "Premium"}`)
	src.Kube = fake.NewClientset(sec)
	l, err = src.Load(context.Background())
	if err == nil || !strings.Contains(err.Error(), `loadBalancerSku: "Premium"`) || l.Secret == nil {
		t.Errorf("err = %v, secret %v: want the key named and the Secret", err, l.Secret != nil)
	}

	// A Secret without the key says which keys it has.
	sec.Data = map[string][]byte{"azure.json": nil}
	src.Kube = fake.NewClientset(sec)
	if _, err := src.Load(context.Background()); err == nil || !strings.Contains(err.Error(), "has no key cloud-config (keys: azure.json)") {
		t.Errorf("err = %v", err)
	}
}

// TestLoadLeftoverSecretIgnored: a file without cloudConfigType is the only source, as in the
// existing provider: a Secret of the default name is not even read.
func TestLoadLeftoverSecretIgnored(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "azure.json")
	if err := os.WriteFile(file, []byte(minimal+`, "tags": "env=file"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	sec := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultSecretNamespace, Name: DefaultSecretName},
		Data: map[string][]byte{SecretKey: []byte(`{"tags": "env=secret"}`)}}
	kube := fake.NewClientset(sec)
	src := Source{File: file, Namespace: DefaultSecretNamespace, Name: DefaultSecretName, Kube: kube}
	l, err := src.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if l.Config.Tags != "env=file" || l.Secret != nil || l.Type != sources.TypeFile || l.TypeSet {
		t.Errorf("tags %q secret %v type %q (set %v): want the file alone", l.Config.Tags, l.Secret != nil, l.Type, l.TypeSet)
	}
	if l.Origin != "file "+file || !strings.Contains(l.SecretNote, "not read: the file sets no cloudConfigType") {
		t.Errorf("origin %q, note %q", l.Origin, l.SecretNote)
	}
	for _, a := range kube.Actions() {
		if a.GetResource().Resource == "secrets" {
			t.Errorf("the Secret was read: %v", a)
		}
	}
}

// TestLoadTabIndentedMergeFile: a JSON file indented with tabs (which YAML refuses) chooses its
// sources and is merged like any other.
func TestLoadTabIndentedMergeFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "azure.json")
	doc := "{\n\t\"subscriptionId\": \"sub\",\n\t\"resourceGroup\": \"rg\",\n\t\"location\": \"westeurope\",\n" +
		"\t\"useManagedIdentityExtension\": true,\n\t\"cloudConfigType\": \"merge\",\n\t\"tags\": \"env=file\"\n}\n"
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	sec := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultSecretNamespace, Name: DefaultSecretName},
		Data: map[string][]byte{SecretKey: []byte("{\n\t\"tags\": \"env=secret\"\n}")}}
	src := Source{File: file, Namespace: DefaultSecretNamespace, Name: DefaultSecretName, Kube: fake.NewClientset(sec)}
	l, err := src.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if l.Config.Tags != "env=secret" || l.Type != sources.TypeMerge {
		t.Errorf("tags %q type %q: want the Secret merged over the file", l.Config.Tags, l.Type)
	}
}
