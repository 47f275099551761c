package loadtest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/server"
)

// startRealServer runs scalechat's server on loopback for the test.
func startRealServer(t *testing.T) string {
	t.Helper()
	cfg := server.DefaultConfig()
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("server did not shut down")
		}
	})
	return "ws://" + ln.Addr().String() + "/ws"
}

func TestLosslessAgainstRealServer(t *testing.T) {
	url := startRealServer(t)
	tests := []struct {
		name string
		step Step
	}{
		{"rooms", testStep("rooms", 10, 5)},
		{"one room", testStep("oneroom", 1, 30)},
		{"topics", func() Step { s := testStep("topics", 20, 3); s.RoomsPerClient = 5; s.RoomSkew = 0.8; return s }()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, url, tt.step)
			res := runTest(t, cfg)
			if len(res.Failures) > 0 {
				t.Fatalf("failures: %v", res.Failures)
			}
			s := res.Meta.Steps[0]
			clients := int64(tt.step.Clients())
			if s.Joined != clients || s.Sent != clients*10 || s.Received != s.Expected || s.Lost != 0 {
				t.Fatalf("step %+v", s)
			}
			if tt.step.RoomsPerClient == 1 && s.Expected != s.Sent*int64(tt.step.RoomSize) {
				t.Fatalf("expected %d, want sent × room size = %d", s.Expected, s.Sent*int64(tt.step.RoomSize))
			}
			if s.Replayed != 0 || s.OutOfOrder != 0 || s.Invalid != 0 || s.ServerErrors != 0 {
				t.Errorf("anomalies %+v", s)
			}
			checkCSVAgainstMeta(t, readCSV(t, cfg.Out), readMeta(t, cfg.Out))
		})
	}
}
