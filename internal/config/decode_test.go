package config

import "testing"

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"JSON syntax error names line, column and key",
			"{\n  \"tenantId\": \"t\",\n  \"location\" \"eastus\"\n}",
			`JSON syntax error at line 3, column 14 (byte 35) near key "location": invalid character '"' after object key`},
		{"JSON syntax error in a tab-indented file",
			"{\n\t\"tenantId\": \"t\"\n\t\"location\": \"eastus\"\n}",
			`JSON syntax error at line 3, column 2 (byte 21) near key "tenantId": invalid character '"' after object key:value pair`},
		{"JSON type error names the key",
			`{"cloudProviderRateLimitQPS": "ten"}`,
			`key "cloudProviderRateLimitQPS": a JSON string where a number is expected (line 1, column 35)`},
		{"JSON duplicate key",
			"{\n  \"tenantId\": \"a\",\n  \"tenantId\": \"b\"\n}",
			`duplicate key "tenantId" at line 3, column 3 (first set at line 2, column 3)`},
		{"JSON duplicate key differing in case",
			"{\n\t\"tenantId\": \"a\",\n\t\"TenantID\": \"b\"\n}",
			`duplicate key "TenantID" at line 3, column 2: the same key as "tenantId" at line 2, column 2 (keys are case-insensitive)`},
		{"JSON duplicate key in a nested object",
			`{"multipleStandardLoadBalancerConfigurations":[{"name":"a"},{"name":"b","Name":"c"}]}`,
			`duplicate key "Name" in "multipleStandardLoadBalancerConfigurations[1]" at line 1, column 73: the same key as "name" at line 1, column 62 (keys are case-insensitive)`},
		{"JSON duplicate map key",
			`{"tagsMap":{"team":"a","team":"b"}}`,
			`duplicate key "team" in "tagsMap" at line 1, column 24 (first set at line 1, column 13)`},
		{"JSON duplicate key with a trailing comma (read as YAML)",
			`{"tenantId":"a","tenantId":"b",}`,
			`duplicate key "tenantId" at line 1, column 17 (first set at line 1, column 2)`},
		{"YAML duplicate key",
			"tenantId: a\nlocation: eastus\ntenantId: b\n",
			`duplicate key "tenantId" at line 3, column 1 (first set at line 1, column 1)`},
		{"YAML duplicate key differing in case",
			"tenantId: a\nTENANTID: b\n",
			`duplicate key "TENANTID" at line 2, column 1: the same key as "tenantId" at line 1, column 1 (keys are case-insensitive)`},
		{"YAML duplicate label key",
			"multipleStandardLoadBalancerConfigurations:\n- name: x\n  nodeSelector:\n    matchLabels: {a: b, a: c}\n",
			`duplicate key "a" in "multipleStandardLoadBalancerConfigurations[0].nodeSelector.matchLabels" at line 4, column 25 (first set at line 4, column 19)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Config
			err := Decode([]byte(tc.doc), &c)
			if err == nil {
				t.Fatalf("accepted, want %q", tc.want)
			}
			if err.Error() != tc.want {
				t.Fatalf("got  %q\nwant %q", err.Error(), tc.want)
			}
		})
	}
}

func TestDecodeAccepts(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		check     func(*Config) bool
	}{
		{"tab-indented JSON", "{\n\t\"tenantId\": \"t\",\n\t\"tagsMap\": {\n\t\t\"a\": \"1\"\n\t}\n}",
			func(c *Config) bool { return c.TenantID == "t" && c.TagsMap["a"] == "1" }},
		{"JSON with a trailing comma, as the existing provider's YAML decoder reads it", `{"tenantId":"t",}`,
			func(c *Config) bool { return c.TenantID == "t" }},
		{"YAML-only syntax", "tenantId: t # a comment\ntagsMap:\n  a: '1'\n",
			func(c *Config) bool { return c.TenantID == "t" && c.TagsMap["a"] == "1" }},
		{"map keys differing in case are distinct", `{"tagsMap":{"a":"1","A":"2"}}`,
			func(c *Config) bool { return c.TagsMap["a"] == "1" && c.TagsMap["A"] == "2" }},
		{"YAML label keys differing in case are distinct",
			"multipleStandardLoadBalancerConfigurations:\n- name: x\n  nodeSelector:\n    matchLabels: {a: b, A: c}\n",
			func(c *Config) bool {
				return c.MultipleStandardLoadBalancerConfigurations[0].NodeSelector.MatchLabels["A"] == "c"
			}},
		{"same key in different objects", `{"multipleStandardLoadBalancerConfigurations":[{"name":"a"},{"name":"b"}]}`,
			func(c *Config) bool { return len(c.MultipleStandardLoadBalancerConfigurations) == 2 }},
		{"empty", "  \n", func(c *Config) bool { return c.TenantID == "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Config
			if err := Decode([]byte(tc.doc), &c); err != nil {
				t.Fatal(err)
			}
			if !tc.check(&c) {
				t.Fatalf("decoded wrongly: %+v", c)
			}
		})
	}
}

func TestParseReportsDuplicateKey(t *testing.T) {
	_, err := Parse([]byte(`{"tenantId":"a","aadClientSecret":"first-secret","AADClientSecret":"second-secret"}`), noEnv)
	want := `decoding: duplicate key "AADClientSecret" at line 1, column 50: the same key as "aadClientSecret" at line 1, column 17 (keys are case-insensitive)`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
}
