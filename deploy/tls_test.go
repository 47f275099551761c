package deploy_test

import (
	"strings"
	"testing"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// scenarios/tls.yaml at smoke size: the plain and the TLS target each start
// behind scripts/tls-front.sh's HAProxy, every message is delivered once
// through it, and the server's figures are read from scalechat's pid.
func TestTLSCompareSmoke(t *testing.T) {
	tlsCompareSmoke(t, repoFile(t, ""), "scenarios/tls.yaml", "tls  plain")
}

// scenarios/tls-bun.yaml at smoke size: Bun's server.js serves wss:// with
// the same script and proxy.
func TestBunTLSCompareSmoke(t *testing.T) {
	tlsCompareSmoke(t, needBun(t), "scenarios/tls-bun.yaml", "bun-tls  bun-plain")
}

// tlsCompareSmoke runs a scenario of two targets (plain and TLS) through
// scripts/tls-front.sh at smoke size, from root, and checks every row and
// that the second target's ratios over the first (ratios) are printed.
func tlsCompareSmoke(t *testing.T, root, scenario, ratios string) {
	if testing.Short() {
		t.Skip("starts two servers, two proxies and two load generators")
	}
	testsupport.Need(t, "haproxy", "haproxy")
	testsupport.Need(t, "openssl", "openssl")
	stdout := compareSmoke(t, root, scenario)
	if !strings.Contains(stdout, ratios) {
		t.Errorf("no %q ratios under the table", ratios)
	}
}
