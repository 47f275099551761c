//go:build linux

package bench

import (
	"strings"
	"testing"

	"github.com/scalechat/scalechat/internal/results"
)

// A row's note gives, beside its connection errors, why the first client
// failed or was dropped, and counts the server's error frames apart: a
// cluster past its capacity both refuses messages and drops clients.
func TestTrafficRowNotesConnectionErrors(t *testing.T) {
	const dropped = `the server closed the connection with code 1013: "overloaded"`
	const refused = `server error: {"type":"error","code":"unavailable"}`
	s := results.StepMeta{Clients: 4000, ConnectErrors: 10, Disconnects: 1786, ServerErrors: 286757, FirstError: dropped, FirstServerError: refused}
	note := trafficRow("cluster", &genRun{meta: results.Meta{Steps: []results.StepMeta{s}}}).Note
	for _, want := range []string{"1796 connection errors (first: " + dropped + ")", "286757 error frames from the server (first: " + refused + ")"} {
		if !strings.Contains(note, want) {
			t.Errorf("note %q lacks %q", note, want)
		}
	}
}
