package config

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// maxShownValue is how much of a configured value an error message quotes: enough to recognise
// it, never a huge line in the log (a 10 MB value would otherwise be echoed whole).
const maxShownValue = 64

// Quote renders a configured value for an error message: Go-quoted, cut after maxShownValue
// bytes with its full length noted.
func Quote(v string) string { return quoteUpTo(v, maxShownValue) }

// quoteUpTo is Quote with the cut after limit bytes.
func quoteUpTo(v string, limit int) string {
	if len(v) <= limit {
		return strconv.Quote(v)
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(v[:cut]), len(v))
}
