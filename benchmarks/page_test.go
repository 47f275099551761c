package benchmarks

import (
	"bytes"
	"os"
	"strings"
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

// TestPageShowsTheExampleFile: the page's example of a benchmark in one
// file is scenarios/rooms-slo.yaml as it is (its comments aside), so that
// it runs as shown.
func TestPageShowsTheExampleFile(t *testing.T) {
	b, err := os.ReadFile("../scenarios/rooms-slo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var body []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if !strings.HasPrefix(line, "#") {
			body = append(body, line)
		}
	}
	page, err := os.ReadFile("../docs/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := "```yaml\n" + strings.Join(body, "\n") + "\n```"; !strings.Contains(string(page), want) {
		t.Errorf("docs/benchmarks.md does not show scenarios/rooms-slo.yaml as it is:\n%s", want)
	}
}

// TestPageIsShort: the reference page stays a page (issue 37: at most 300
// lines); a results file with many rows shows a few of them (page_rows)
// and keeps the rest.
func TestPageIsShort(t *testing.T) {
	b, err := os.ReadFile("../docs/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n > 300 {
		t.Errorf("docs/benchmarks.md has %d lines, more than 300: pick the rows a long results file shows (page_rows)", n)
	}
}
