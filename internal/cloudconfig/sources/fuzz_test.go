package sources

import (
	"reflect"
	"testing"

	"github.com/azure-ccm/azure-ccm/internal/config"
)

// FuzzResolve: whatever the file and the Secret hold, choosing and merging the sources never
// panics; a merged result is a document the parser reads; and merging an empty Secret over an
// accepted file changes nothing the parser sees.
func FuzzResolve(f *testing.F) {
	for _, s := range [][2]string{
		{`{"cloudConfigType":"merge","subscriptionId":"s","tags":"a=1"}`, "tags: a=2\n"},
		{"{\n\t\"cloudConfigType\": \"merge\",\n\t\"tenantId\": \"t\"\n}", `{"TenantID":"u"}`},
		{"cloudConfigType: secret\n", `{"tenantId":"t","tenantId":"u"}`},
		{`{"cloudConfigType":"merge",}`, `[]`},
		{`{"cloudConfigType":"merge","tagsMap":{"a":"1","A":"2"}}`, `null`},
		{"cloudConfigType: merge\nmultipleStandardLoadBalancerConfigurations:\n- name: a\n", "{"},
	} {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, file, secret []byte) {
		data, typ, used, err := Resolve(Input{File: file, HasFile: true, Secret: secret, HasSecret: true, SecretName: "ns/n"})
		if err != nil {
			return
		}
		if typ == TypeMerge && used {
			var m map[string]any
			if err := config.Decode(data, &m); err != nil {
				t.Fatalf("merged document not readable: %v\n%s", err, data)
			}
		}
		var direct, merged config.Config
		if config.Decode(file, &direct) != nil {
			return
		}
		out, err := Merge(file, nil)
		if err != nil {
			t.Fatalf("an accepted file does not merge: %v", err)
		}
		if err := config.Decode(out, &merged); err != nil {
			t.Fatalf("the merge of an accepted file is not readable: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(direct, merged) {
			t.Fatalf("merging nothing changed the configuration:\n%+v\n%+v", direct, merged)
		}
	})
}
