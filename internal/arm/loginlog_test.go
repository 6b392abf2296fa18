package arm

import (
	"bytes"
	"flag"
	"strings"
	"testing"

	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/config"
)

// captureKlog sends klog's output to a buffer for the rest of the test.
func captureKlog(t *testing.T) *bytes.Buffer {
	t.Helper()
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	if err := fs.Set("logtostderr", "false"); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	klog.SetOutput(&buf)
	t.Cleanup(func() {
		klog.Flush()
		if err := fs.Set("logtostderr", "true"); err != nil {
			t.Error(err)
		}
	})
	return &buf
}

func TestLogLoginEndpoint(t *testing.T) {
	buf := captureKlog(t)
	env := config.Environment{Name: "AzureChinaCloud", ActiveDirectoryEndpoint: "https://user:pw@login.chinacloudapi.cn/some/path?x=1"}
	LogLoginEndpoint(env, "tenant-1234", AuthClientSecret)
	klog.Flush()
	out := buf.String()
	want := `"Azure login endpoint" authorityHost="https://login.chinacloudapi.cn" tenant="tenant-1234" cloud="AzureChinaCloud" auth="client-secret"`
	if !strings.Contains(out, want) {
		t.Fatalf("log %q\nlacks %s", out, want)
	}
	if strings.Contains(out, "pw") || strings.Contains(out, "x=1") {
		t.Fatalf("log shows more than the host: %q", out)
	}
}
