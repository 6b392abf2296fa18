package arm

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
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
