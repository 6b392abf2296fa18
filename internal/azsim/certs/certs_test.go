package certs

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
)

func TestGenerateServesVerifiableTLS(t *testing.T) {
	b, err := Generate("azsim.test", "10.1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(b.TLS.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"localhost", "127.0.0.1", "::1", "azsim.test", "10.1.2.3"} {
		opts := x509.VerifyOptions{Roots: b.Pool(), DNSName: name}
		if _, err := leaf.Verify(opts); err != nil {
			t.Errorf("verify %s: %v", name, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: b.Pool(), DNSName: "other.example"}); err == nil {
		t.Error("leaf verified for a name it does not carry")
	}

	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{b.TLS}}
	srv.StartTLS()
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: b.Pool()}}}
	resp, err := c.Get("https://localhost:" + port + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

func TestWriteFiles(t *testing.T) {
	b, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	f, err := b.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := os.ReadFile(f.CA)
	if string(ca) != string(b.CAPEM) {
		t.Fatal("ca.pem differs from the generated CA")
	}
	bundle, _ := os.ReadFile(f.Bundle)
	var last *pem.Block
	for rest := bundle; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		last = blk
	}
	if last == nil || string(pem.EncodeToMemory(last)) != string(b.CAPEM) {
		t.Fatal("bundle does not end with the CA")
	}
}
