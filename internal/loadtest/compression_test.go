//go:build linux

package loadtest

import (
	"testing"

	"github.com/scalechat/scalechat/internal/server"
	"github.com/scalechat/scalechat/internal/server/servertest"
)

// With --compression the clients negotiate permessage-deflate with a server
// that accepts it, inflate what it sends and lose nothing; the server
// writes far fewer bytes for the same messages (the text is repetitive).
func TestCompressionAgainstRealServer(t *testing.T) {
	srv := servertest.Start(t, func(c *server.Config) { c.Compression = true })
	written := map[bool]uint64{}
	for _, compress := range []bool{false, true} {
		step := testStep("s", 4, 5)
		step.MsgSize = 1024
		cfg := testConfig(t, srv.URL("/ws"), step)
		cfg.Compression = compress
		before := srv.Server().Stats().BytesOut
		res := runTest(t, cfg)
		written[compress] = srv.Server().Stats().BytesOut - before
		s := res.Meta.Steps[0]
		if s.Sent == 0 || s.Received != s.Expected || s.Invalid != 0 || s.Disconnects != 0 {
			t.Fatalf("compression %v: sent %d, received %d of %d, invalid %d, disconnects %d",
				compress, s.Sent, s.Received, s.Expected, s.Invalid, s.Disconnects)
		}
		if res.Meta.Compression != compress {
			t.Errorf("meta.json compression = %v", res.Meta.Compression)
		}
	}
	if written[true]*3 > written[false] {
		t.Errorf("the server wrote %d bytes compressed, %d plain: compression did not take", written[true], written[false])
	}
}
