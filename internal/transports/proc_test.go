package transports

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseMetrics(t *testing.T) {
	text := `# HELP scalechat_received_bytes_total WebSocket bytes read.
# TYPE scalechat_received_bytes_total counter
scalechat_received_bytes_total 1234
scalechat_sent_bytes_total 5.5e+06
scalechat_disconnects_total{code="1000"} 7
scalechat_received_bytes_total_other 9
`
	got, err := parseMetrics(strings.NewReader(text), metricWSIn, metricWSOut)
	if err != nil || got[metricWSIn] != 1234 || got[metricWSOut] != 5.5e6 || len(got) != 2 {
		t.Errorf("parseMetrics: %v %v", got, err)
	}
	if _, err := parseMetrics(strings.NewReader(text), metricHTTPIn); err == nil || !strings.Contains(err.Error(), metricHTTPIn) {
		t.Errorf("a missing metric: %v", err)
	}
	if _, err := parseMetrics(strings.NewReader("scalechat_sent_bytes_total x\n"), metricWSOut); err == nil {
		t.Error("a bad value was accepted")
	}
}

func TestProcessCPU(t *testing.T) {
	deadline := time.Now().Add(50 * time.Millisecond)
	for x := 0; time.Now().Before(deadline); x++ {
		_ = x * x
	}
	cpu, err := processCPU(os.Getpid())
	if err != nil || cpu < 10*time.Millisecond {
		t.Errorf("own CPU %v, %v", cpu, err)
	}
	if _, err := processCPU(1 << 30); err == nil {
		t.Error("a process that does not exist has a CPU time")
	}
}

func TestSteps(t *testing.T) {
	got, err := Steps(100, 1000, 50)
	if err != nil || len(got) != 19 || got[0] != 100 || got[18] != 1000 {
		t.Errorf("Steps(100, 1000, 50) = %v, %v", got, err)
	}
	for _, bad := range [][3]int{{0, 10, 1}, {10, 5, 1}, {1, 10, 0}} {
		if _, err := Steps(bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("Steps%v accepted", bad)
		}
	}
}
