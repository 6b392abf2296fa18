package sources

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
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
