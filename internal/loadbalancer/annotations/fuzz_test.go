package annotations

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzParse: any annotation value yields options or errors that name an annotation — never a
// panic, and never options together with an error (the caller would write to ARM).
func FuzzParse(f *testing.F) {
	seeds := [][2]string{
		{Internal, "true"}, {TCPIdleTimeout, "4"}, {TCPIdleTimeout, "-1"}, {PIPPrefixID, "/subscriptions/x"},
		{IPv4, "10.0.0.4"}, {AllowedServiceTags, "AzureCloud,Internet"},
		{ProbeRequestPath, "/healthz"}, {DNSLabelName, "My-App"}, {"service.beta.kubernetes.io/port_80_health-probe_interval", "5"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1], int32(80), "TCP")
	}
	f.Fuzz(func(t *testing.T, key, value string, port int32, proto string) {
		svc := &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", UID: "u", Annotations: map[string]string{key: value}},
			Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Port: port, Protocol: v1.Protocol(proto)}}},
		}
		o, err := Parse(svc)
		if err == nil {
			if o == nil {
				t.Fatalf("no options and no error for %q=%q", key, value)
			}
			return
		}
		var inv *InvalidError
		if !errors.As(err, &inv) {
			t.Fatalf("error for %q=%q names no annotation: %v", key, value, err)
		}
	})
}
