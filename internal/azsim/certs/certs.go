// Package certs generates the throw-away certificate authority and server certificate that
// azsim serves HTTPS with, and writes the CA where clients can trust it (SSL_CERT_FILE).
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Bundle is a generated CA and a leaf certificate signed by it.
type Bundle struct {
	CACert  *x509.Certificate
	CAPEM   []byte
	LeafPEM []byte
	KeyPEM  []byte
	// TLS is ready to use as a server certificate.
	TLS tls.Certificate
}

// DefaultNames are always in the leaf certificate.
var DefaultNames = []string{"localhost", "127.0.0.1", "::1"}

// Generate creates a CA and a leaf valid for DefaultNames plus extra (DNS names or IPs).
func Generate(extra ...string) (*Bundle, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "azsim local CA", Organization: []string{"azsim"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(1, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}

	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating server key: %w", err)
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "azsim", Organization: []string{"azsim"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	seen := map[string]bool{}
	for _, n := range append(append([]string{}, DefaultNames...), extra...) {
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		if ip := net.ParseIP(n); ip != nil {
			leafTmpl.IPAddresses = append(leafTmpl.IPAddresses, ip)
		} else {
			leafTmpl.DNSNames = append(leafTmpl.DNSNames, n)
		}
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("creating server certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(leafKey)
	if err != nil {
		return nil, err
	}
	b := &Bundle{
		CACert:  caCert,
		CAPEM:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		LeafPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
	// The chain includes the CA so clients that only trust a bundle still verify.
	b.TLS, err = tls.X509KeyPair(append(append([]byte{}, b.LeafPEM...), b.CAPEM...), b.KeyPEM)
	if err != nil {
		return nil, err
	}
	return b, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return n
}

// Pool returns a cert pool with only the CA.
func (b *Bundle) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(b.CACert)
	return p
}

// Files names the files WriteFiles wrote.
type Files struct {
	CA     string // the CA alone
	Bundle string // system roots followed by the CA, for SSL_CERT_FILE in processes that also talk elsewhere
}

// WriteFiles writes ca.pem and ca-bundle.pem into dir.
func (b *Bundle) WriteFiles(dir string) (Files, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Files{}, err
	}
	f := Files{CA: filepath.Join(dir, "ca.pem"), Bundle: filepath.Join(dir, "ca-bundle.pem")}
	if err := os.WriteFile(f.CA, b.CAPEM, 0o644); err != nil {
		return Files{}, err
	}
	bundle := append(systemRootsPEM(), b.CAPEM...)
	if err := os.WriteFile(f.Bundle, bundle, 0o644); err != nil {
		return Files{}, err
	}
	return f, nil
}

// systemRootCandidates are the usual places of the system trust store on Linux.
var systemRootCandidates = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/ssl/cert.pem",
}

func systemRootsPEM() []byte {
	if f := os.Getenv("SSL_CERT_FILE"); f != "" {
		if data, err := os.ReadFile(f); err == nil {
			return withNewline(data)
		}
	}
	for _, p := range systemRootCandidates {
		if data, err := os.ReadFile(p); err == nil {
			return withNewline(data)
		}
	}
	return nil
}

func withNewline(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] != '\n' {
		return append(b, '\n')
	}
	return b
}
