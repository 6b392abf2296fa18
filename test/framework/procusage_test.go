package framework

import (
	"os"
	"testing"
)

func TestParseProcUsage(t *testing.T) {
	stat := []byte("4242 (azure cloud (x)) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 130 0 0 20 0 12 0 100 0 0\n")
	status := []byte("Name:\tccm\nVmPeak:\t  900000 kB\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\n")
	u, err := parseProcUsage(stat, status)
	if err != nil {
		t.Fatal(err)
	}
	if u.CPUSeconds != 3.8 || u.RSSBytes != 100<<20 || u.PeakRSSBytes != 200<<20 {
		t.Fatalf("got %+v", u)
	}
	for _, bad := range []string{"4242 no-paren", "4242 (x) S 1 2"} {
		if _, err := parseProcUsage([]byte(bad), status); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestReadProcUsageSelf(t *testing.T) {
	u, err := ReadProcUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.RSSBytes <= 0 || u.PeakRSSBytes < u.RSSBytes {
		t.Fatalf("implausible usage of the test process: %+v", u)
	}
}
