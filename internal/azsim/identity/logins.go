package identity

import (
	"sort"
	"strings"
	"sync"

	"github.com/golang-jwt/jwt/v5"
)

// Login methods recorded by Logins.
const (
	LoginClientSecret      = "client-secret"
	LoginClientCertificate = "client-certificate"
	LoginWorkloadIdentity  = "workload-identity"
	LoginManagedIdentity   = "managed-identity"
)

// LoginCount is how many tokens azsim issued to one identity by one login method: a test sees
// which credential a program really logged in with.
type LoginCount struct {
	Method   string `json:"method"`
	ClientID string `json:"clientId"`
	Count    int64  `json:"count"`
}

type loginKey struct{ method, clientID string }

type loginLog struct {
	mu     sync.Mutex
	counts map[loginKey]int64
}

func (l *loginLog) record(method, clientID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.counts == nil {
		l.counts = map[loginKey]int64{}
	}
	l.counts[loginKey{method, strings.ToLower(clientID)}]++
}

// Logins returns the tokens issued since the start (or the last ResetLogins), by method and
// client ID, sorted.
func (s *Service) Logins() []LoginCount {
	s.logins.mu.Lock()
	defer s.logins.mu.Unlock()
	out := make([]LoginCount, 0, len(s.logins.counts))
	for k, n := range s.logins.counts {
		out = append(out, LoginCount{Method: k.method, ClientID: k.clientID, Count: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Method != out[j].Method {
			return out[i].Method < out[j].Method
		}
		return out[i].ClientID < out[j].ClientID
	})
	return out
}

// ResetLogins forgets the tokens issued so far.
func (s *Service) ResetLogins() {
	s.logins.mu.Lock()
	s.logins.counts = nil
	s.logins.mu.Unlock()
}

// isCertificateAssertion tells a certificate's client assertion (it names the certificate in
// x5t or x5t#S256) from a federated token.
func isCertificateAssertion(assertion string) bool {
	tok, _, err := jwt.NewParser().ParseUnverified(assertion, &jwt.RegisteredClaims{})
	if err != nil {
		return false
	}
	_, hasX5t := tok.Header["x5t"]
	_, hasX5tS256 := tok.Header["x5t#S256"]
	return hasX5t || hasX5tS256
}
