package arm

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/azure-ccm/azure-ccm/internal/config"
)

// FuzzRetryAfter: whatever ARM (or a proxy) puts in retry-after-ms, x-ms-retry-after-ms or
// Retry-After, the wait read is never negative nor beyond maxRetryAfter.
func FuzzRetryAfter(f *testing.F) {
	for _, s := range [][3]string{{"", "", "5"}, {"1500", "", ""}, {"", "250", "Wed, 21 Oct 2099 07:28:00 GMT"},
		{"", "", "9223372036854775807"}, {"-1", "x", "-3"}, {"", "", "Mon, 01 Jan 0001 00:00:00 GMT"}} {
		f.Add(s[0], s[1], s[2])
	}
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, ms, xms, ra string) {
		h := http.Header{}
		for k, v := range map[string]string{"retry-after-ms": ms, "x-ms-retry-after-ms": xms, "Retry-After": ra} {
			if v != "" {
				h.Set(k, v)
			}
		}
		d, ok := parseRetryAfter(h, now)
		if d < 0 || d > maxRetryAfter || (!ok && d != 0) {
			t.Fatalf("%q %q %q: %v %v", ms, xms, ra, d, ok)
		}
	})
}

// FuzzRateLimitHeaders: x-ms-ratelimit-remaining-* headers of any shape give either nothing or
// a number that appears in one of them.
func FuzzRateLimitHeaders(f *testing.F) {
	f.Add("x-ms-ratelimit-remaining-subscription-reads", "11999", "x-ms-ratelimit-remaining-resource", "Microsoft.Compute/HighCostGet3Min;107,Microsoft.Compute/HighCostGet30Min;587")
	f.Add("x-ms-ratelimit-remaining-subscription-writes", "-5", "x-ms-ratelimit-remaining-tenant-reads", ";;,,")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		h := http.Header{}
		h.Add(k1, v1)
		h.Add(k2, v2)
		for _, c := range []Class{ClassRead, ClassWrite, ClassDelete} {
			for _, sub := range []bool{true, false} {
				n, ok := minRemaining(h, c, sub)
				if !ok {
					continue
				}
				s := strconv.FormatInt(int64(n), 10)
				if !strings.Contains(v1, s) && !strings.Contains(v2, s) {
					t.Fatalf("%v from %q=%q, %q=%q", n, k1, v1, k2, v2)
				}
			}
		}
	})
}

// FuzzScrub: a credential embedded in any text, in any encoding Scrub knows (plain, escaped,
// base64, each applied twice) and in either case, never survives scrubbing, not even its first
// minPrefix bytes.
func FuzzScrub(f *testing.F) {
	f.Add("Sup3r+Secret/Value=with&form%chars", "client_secret=", "&grant_type=x", uint8(0), false)
	f.Add("p@ss word!", "<p>", "</p>", uint8(3), true)
	f.Add("abcd", "xx", "yy", uint8(4), false)
	f.Add("aaaaaaaaaaaaaaab", "aaaaaaa", "b", uint8(9), false)
	f.Fuzz(func(t *testing.T, secret, before, after string, which uint8, upper bool) {
		if len(secret) < config.MinSecretLength || strings.Contains(secret, "\x00") {
			return
		}
		encs := textEncodings()
		var form string
		switch n := len(encs); {
		case int(which) < n:
			form = encs[which](secret)
		case int(which) < n+n*n:
			i := int(which) - n
			form = encs[i%n](encs[i/n](secret))
		default:
			form = secret
		}
		if upper {
			form = mapASCII(form, func(c byte) byte {
				if 'a' <= c && c <= 'z' {
					return c - 'a' + 'A'
				}
				return c
			})
		}
		s := NewScrubber(&config.Config{AADClientSecret: config.Secret(secret)}, func(string) string { return "" })
		// The marker is blanked out, so that a credential that begins or ends like it is not
		// found straddling it.
		out := strings.ReplaceAll(s.Scrub(before+form+after), redactedText, "\x00")
		need := form[:min(len(form), minPrefix)]
		if strings.Contains(mapASCII(out, lowerASCII), mapASCII(need, lowerASCII)) {
			t.Fatalf("%q survives in %q", need, out)
		}
	})
}

// mapASCII applies fn to every byte of s (Scrub folds ASCII letters only).
func mapASCII(s string, fn func(byte) byte) string {
	b := []byte(s)
	for i := range b {
		b[i] = fn(b[i])
	}
	return string(b)
}
