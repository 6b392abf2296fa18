package cloudconfig

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestResolve(t *testing.T) {
	file := []byte(`{"subscriptionId": "s", "loadBalancerSku": "standard", "tags": "a=1"}`)
	merge := []byte(`{"cloudConfigType": "Merge", "subscriptionId": "s", "loadBalancerSku": "standard", "tags": "a=1"}`)
	secret := []byte("LoadBalancerSku: service\ntags: a=2\n")
	for _, c := range []struct {
		name       string
		in         Input
		wantType   string
		wantSecret bool
		want       map[string]any // decoded result; nil when an error is expected
		wantErr    string
	}{
		{"no file: the Secret", Input{Secret: secret, HasSecret: true}, TypeSecret, true,
			map[string]any{"LoadBalancerSku": "service", "tags": "a=2"}, ""},
		{"no file, no Secret", Input{SecretName: "kube-system/azure-cloud-provider"}, TypeSecret, false, nil, "does not exist"},
		{"no cloudConfigType: the file, a Secret is ignored", Input{File: file, HasFile: true, Secret: secret, HasSecret: true}, TypeFile, false,
			map[string]any{"subscriptionId": "s", "loadBalancerSku": "standard", "tags": "a=1"}, ""},
		{"merge: Secret keys win, case-insensitively", Input{File: merge, HasFile: true, Secret: secret, HasSecret: true}, TypeMerge, true,
			map[string]any{"cloudConfigType": "Merge", "subscriptionId": "s", "LoadBalancerSku": "service", "tags": "a=2"}, ""},
		{"merge without a Secret: the file", Input{File: merge, HasFile: true}, TypeMerge, false,
			map[string]any{"cloudConfigType": "Merge", "subscriptionId": "s", "loadBalancerSku": "standard", "tags": "a=1"}, ""},
		{"file ignores the Secret", Input{File: []byte(`{"cloudConfigType": "File", "tags": "a=1"}`), HasFile: true, Secret: secret, HasSecret: true}, TypeFile, false,
			map[string]any{"cloudConfigType": "File", "tags": "a=1"}, ""},
		{"secret ignores the file", Input{File: []byte(`cloudConfigType: secret`), HasFile: true, Secret: secret, HasSecret: true}, TypeSecret, true,
			map[string]any{"LoadBalancerSku": "service", "tags": "a=2"}, ""},
		{"secret without a Secret", Input{File: []byte(`cloudConfigType: secret`), HasFile: true, SecretName: "ns/n"}, TypeSecret, false, nil, `cloudConfigType: "secret" needs Secret ns/n`},
		{"unknown type names the key", Input{File: []byte(`{"cloudConfigType": "vault"}`), HasFile: true}, "", false, nil, `cloudConfigType: "vault" is not one of file, secret, merge`},
	} {
		t.Run(c.name, func(t *testing.T) {
			data, typ, usedSecret, err := Resolve(c.in)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if typ != c.wantType || usedSecret != c.wantSecret {
				t.Errorf("type %q secret %v, want %q %v", typ, usedSecret, c.wantType, c.wantSecret)
			}
			got := map[string]any{}
			if err := yamlToMap(data, got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("data = %v, want %v", got, c.want)
			}
		})
	}
}

func yamlToMap(b []byte, m map[string]any) error {
	raw, err := topLevel(b, "result")
	if err != nil {
		return err
	}
	for k, v := range raw {
		var x any
		if err := json.Unmarshal(v, &x); err != nil {
			return err
		}
		m[k] = x
	}
	return nil
}

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
	if l.Config.Tags != "env=secret" || l.Secret == nil || l.Type != TypeMerge || !l.TypeSet {
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
	if l.Config.Tags != "env=file" || l.Secret != nil || l.Type != TypeFile || l.TypeSet {
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
	if l.Config.Tags != "env=secret" || l.Type != TypeMerge {
		t.Errorf("tags %q type %q: want the Secret merged over the file", l.Config.Tags, l.Type)
	}
}

func TestResolveErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		in   Input
		want string
	}{
		{"duplicate key in the file",
			Input{File: []byte("{\n\t\"cloudConfigType\": \"merge\",\n\t\"CloudConfigType\": \"file\"\n}"), HasFile: true},
			`decoding the file: duplicate key "CloudConfigType" at line 3, column 2: the same key as "cloudConfigType" at line 2, column 2 (keys are case-insensitive)`},
		{"duplicate key in the Secret",
			Input{File: []byte(`{"cloudConfigType": "merge"}`), HasFile: true, Secret: []byte("tags: a\ntags: b\n"), HasSecret: true},
			`decoding the Secret: duplicate key "tags" at line 2, column 1 (first set at line 1, column 1)`},
		{"JSON syntax error in the file",
			Input{File: []byte("{\n\t\"cloudConfigType\": \"merge\"\n\t\"tags\": \"a\"\n}"), HasFile: true},
			`decoding the file: JSON syntax error at line 3, column 2 (byte 32) near key "cloudConfigType": invalid character '"' after object key:value pair`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, _, err := Resolve(c.in)
			if err == nil || err.Error() != c.want {
				t.Fatalf("got  %v\nwant %s", err, c.want)
			}
		})
	}
}
