package arm

import (
	"encoding/json"
	"net/netip"
	"testing"
)

func TestDeepMerge(t *testing.T) {
	cases := []struct{ base, patch, want string }{
		{`{"a":1,"b":{"c":1,"d":2}}`, `{"b":{"c":3}}`, `{"a":1,"b":{"c":3,"d":2}}`},
		{`{"a":[1,2,3]}`, `{"a":[4]}`, `{"a":[4]}`},
		{`{"a":{"x":1}}`, `{"a":null}`, `{"a":null}`},
		{`{}`, `{"n":{"m":{"k":"v"}}}`, `{"n":{"m":{"k":"v"}}}`},
		{`{"a":"s"}`, `{"a":{"o":1}}`, `{"a":{"o":1}}`},
	}
	for _, c := range cases {
		b, _ := DecodeDoc([]byte(c.base))
		p, _ := DecodeDoc([]byte(c.patch))
		got, _ := json.Marshal(DeepMerge(b, p))
		w, _ := DecodeDoc([]byte(c.want))
		want, _ := json.Marshal(w)
		if string(got) != string(want) {
			t.Errorf("merge(%s,%s) = %s, want %s", c.base, c.patch, got, want)
		}
	}
}

func TestETagMatch(t *testing.T) {
	cases := []struct {
		header, etag string
		want         bool
	}{
		{`W/"abc"`, `W/"abc"`, true},
		{`"abc"`, `W/"abc"`, true},
		{`abc`, `W/"abc"`, true},
		{`"1"`, `"1"`, true},
		{`"2"`, `"1"`, false},
		{`W/"x", W/"abc"`, `W/"abc"`, true},
		{`W/"abd"`, `W/"abc"`, false},
	}
	for _, c := range cases {
		if got := etagMatch(c.header, c.etag); got != c.want {
			t.Errorf("etagMatch(%q,%q)=%v", c.header, c.etag, got)
		}
	}
}

func TestIPAllocation(t *testing.T) {
	e := NewEngine(Config{})
	r, _ := ParseRange("10.0.0.0/29", 4, 1) // usable: .4 .5 .6
	err := e.Do(func(tx *Tx) error {
		var got []string
		for _, o := range []string{"a", "b", "c"} {
			ip, err := tx.ReserveIP("s", []IPRange{r}, "/subscriptions/x/resourceGroups/g/providers/N/t/"+o, "")
			if err != nil {
				return err
			}
			got = append(got, ip)
		}
		if got[0] != "10.0.0.4" || got[2] != "10.0.0.6" {
			t.Errorf("allocated %v", got)
		}
		if _, err := tx.ReserveIP("s", []IPRange{r}, "/subscriptions/x/resourceGroups/g/providers/N/t/d", ""); err == nil {
			t.Error("full range allocated")
		}
		// Same owner gets the same address back.
		if ip, _ := tx.ReserveIP("s", []IPRange{r}, "/subscriptions/x/resourceGroups/g/providers/N/t/b", ""); ip != "10.0.0.5" {
			t.Errorf("re-reserve gave %s", ip)
		}
		// Static outside usable range and taken addresses are rejected.
		if _, err := tx.ReserveIP("s", []IPRange{r}, "/subscriptions/x/resourceGroups/g/providers/N/t/d", "10.0.0.7"); err == nil {
			t.Error("broadcast address allocated")
		}
		if _, err := tx.ReserveIP("s", []IPRange{r}, "/subscriptions/x/resourceGroups/g/providers/N/t/d", "10.0.0.4"); err == nil {
			t.Error("taken address allocated")
		}
		tx.ReleaseIPsExcept("/subscriptions/x/resourceGroups/g/providers/N/t", []string{"/subscriptions/x/resourceGroups/g/providers/N/t/a"})
		if ips := tx.IPsInSpace("s"); len(ips) != 1 || ips[0] != "10.0.0.4" {
			t.Errorf("after release %v", ips)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	v6, _ := ParseRange("2001:db8::/120", 1, 0)
	_ = e.Do(func(tx *Tx) error {
		ip, err := tx.ReserveIP("v6", []IPRange{v6}, "/subscriptions/x/o", "")
		if err != nil || netip.MustParseAddr(ip) != netip.MustParseAddr("2001:db8::1") {
			t.Errorf("v6 %s %v", ip, err)
		}
		return nil
	})
}
