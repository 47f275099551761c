//go:build linux

package cli

import (
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestREADMEListsEveryServeFlag keeps the README's table of serve flags
// and the command's real flags in step.
func TestREADMEListsEveryServeFlag(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(readme), "### `scalechat serve` flags")
	if i < 0 {
		t.Fatal("README has no serve flags section")
	}
	section := string(readme[i:])
	section = section[:strings.Index(section, "\n## ")]
	var documented []string
	for _, m := range regexp.MustCompile("`--([a-z0-9-]+)`").FindAllStringSubmatch(section, -1) {
		documented = append(documented, m[1])
	}
	root := newRootCmd(nil, io.Discard, io.Discard)
	serve, _, err := root.Find([]string{"serve"})
	if err != nil {
		t.Fatal(err)
	}
	serve.Flags().VisitAll(func(f *pflag.Flag) {
		// A hidden flag is out of --help (--room-order, removed, still
		// read to answer scripts that give it): not the README's either.
		if f.Name != "help" && !f.Hidden && !slices.Contains(documented, f.Name) {
			t.Errorf("--%s is not in the README's serve flags", f.Name)
		}
	})
	for _, name := range documented {
		if serve.Flags().Lookup(name) == nil {
			t.Errorf("the README documents --%s, which serve does not have", name)
		}
	}
	for _, cmd := range root.Commands() {
		if cmd.Hidden || cmd.Name() == "help" || cmd.Name() == "completion" {
			continue
		}
		if !strings.Contains(string(readme), "`scalechat "+cmd.Name()+"`") {
			t.Errorf("the README's commands table lacks scalechat %s", cmd.Name())
		}
	}
}
