package knee

import (
	"math"
	"strings"
	"testing"

	"github.com/scalechat/scalechat/internal/results"
)

func TestFirstLimit(t *testing.T) {
	tests := []struct {
		name  string
		step  results.StepMeta
		cpu   float64
		cores int
		kind  string
		text  string
	}{
		{"generator before all", results.StepMeta{Saturated: true, SaturationReason: "generator CPU 95% of 2 cores", RateLimited: 5}, 2, 2,
			"generator", "generator CPU 95% of 2 cores"},
		{"rate limit", results.StepMeta{Sent: 200, RateLimited: 10, ServerErrors: 10}, 1.9, 2, "rate-limit", "10 message(s) refused with rate_limited (5.00% of 200 sent)"},
		{"other refusals", results.StepMeta{ServerErrors: 3, FirstServerError: "server error: not_joined", Disconnects: 1, FirstError: "reset"}, 0, 0,
			"refusals", "refused 3 message(s) (first: server error: not_joined)"},
		{"file descriptors", results.StepMeta{ConnectErrors: 7, FirstError: "dial: socket: too many open files"}, 1.9, 2, "file-descriptors", "7 client(s) failed"},
		{"network before server CPU", results.StepMeta{ConnectErrors: 1, NetworkFull: "eth0 received 941 Mb/s of its 1000 Mb/s link"}, 1.85, 2,
			"network", "the network: eth0 received 941 Mb/s"},
		{"server CPU", results.StepMeta{ConnectErrors: 1}, 1.85, 2, "server-cpu", "1.85 of 2 cores"},
		{"server CPU unknown cores", results.StepMeta{Disconnects: 2, FirstError: "reset"}, 1.85, 0, "connections", "2 dropped"},
		{"latency", results.StepMeta{LatencyMs: results.Percentiles{P99: 63.2}, DeliveryRatio: 1}, 0.5, 2, "latency", "p99 63.2ms, delivery 100.000%; server CPU 0.50 cores"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := FirstLimit(tt.step, tt.cpu, tt.cores)
			if l.Kind != tt.kind || !strings.Contains(l.Text, tt.text) {
				t.Errorf("got %s: %s; want %s with %q", l.Kind, l.Text, tt.kind, tt.text)
			}
		})
	}
}

func TestServerCores(t *testing.T) {
	rows := []results.ServerRow{
		{UnixUS: 0, Node: "a", CPUSeconds: 10}, {UnixUS: 1e6, Node: "a", CPUSeconds: 10.5}, {UnixUS: 3e6, Node: "a", CPUSeconds: 11.5},
		{UnixUS: 1e6, Node: "b", CPUSeconds: 1}, {UnixUS: 3e6, Node: "b", CPUSeconds: 3}, {UnixUS: 2e6, Node: "b", CPUSeconds: math.NaN()},
		{UnixUS: 9e6, Node: "a", CPUSeconds: 100},
	}
	got, ok := ServerCores(rows, 1e6, 3e6)
	if !ok || math.Abs(got-1.5) > 1e-9 { // a: 1 s over 2 s, b: 2 s over 2 s
		t.Errorf("ServerCores = %g, %v; want 1.5", got, ok)
	}
	if _, ok := ServerCores(rows, 4e6, 5e6); ok {
		t.Error("a window without two scrapes measured something")
	}
}
