package benchmarks

import (
	"bytes"
	"os"
	"testing"

	"github.com/scalechat/scalechat/internal/benchpage"
)

// TestPageIsFresh: docs/benchmarks.md is what scalechat bench page makes
// of the committed results, so that no figure on it drifts from its file.
func TestPageIsFresh(t *testing.T) {
	sections, err := benchpage.Load(Results(), "../benchmarks/results")
	if err != nil {
		t.Fatal(err)
	}
	want, err := benchpage.Render(sections)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../docs/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("docs/benchmarks.md is not the page of benchmarks/results: run go generate ./benchmarks (%d bytes, the page is %d)", len(got), len(want))
	}
}
