package testsupport

import "testing"

// INFO replication as redis-server 7 writes it (CRLF lines).
const replInfo = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\n" +
	"slave0:ip=127.0.0.1,port=12001,state=online,offset=1500,lag=0\r\n" +
	"slave1:ip=127.0.0.1,port=12002,state=online,offset=900,lag=1\r\n" +
	"master_failover_state:no-failover\r\nmaster_replid:8f2e\r\nmaster_repl_offset:1500\r\n"

func TestReplicationOffsets(t *testing.T) {
	if off, ok := replField(replInfo, "master_repl_offset"); !ok || off != 1500 {
		t.Fatalf("master_repl_offset = %d, %v; want 1500", off, ok)
	}
	if _, ok := replField("", "master_repl_offset"); ok {
		t.Error("an empty answer gave an offset")
	}
	for _, tc := range []struct {
		target int64
		want   int
	}{{1500, 1}, {900, 2}, {1501, 0}} {
		if got := ackedReplicas(replInfo, tc.target); got != tc.want {
			t.Errorf("ackedReplicas(%d) = %d, want %d", tc.target, got, tc.want)
		}
	}
}
