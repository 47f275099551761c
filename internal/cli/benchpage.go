//go:build linux

package cli

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/scalechat/scalechat/benchmarks"
	"github.com/scalechat/scalechat/internal/benchpage"
)

func newBenchPageCmd() *cobra.Command {
	var dir, out string
	cmd := &cobra.Command{
		Use:   "page",
		Short: "Make the benchmarks page (docs/benchmarks.md) from results files of scalechat bench --json",
		Long: `page writes the benchmarks reference page from results files (*.json written by
scalechat bench --json): a section per file naming its machine, day, build and the command
that measures it again, and a table of its rows. --smoke runs are left out.

docs/benchmarks.md is this page of benchmarks/results (go generate ./benchmarks runs
"scalechat bench page --results results --out ../docs/benchmarks.md"); a test fails when
they disagree. Without --results the page is of the results this binary embeds.`,
		Example: `  scalechat bench page > page.md                      # the committed results, as this binary has them
  scalechat bench page --results my-results --out my-results/page.md`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			fsys, link := benchmarks.Results(), "benchmarks/results"
			if dir != "" {
				fsys, link = os.DirFS(dir), dir
				if out != "" {
					rel, err := relativeLink(out, dir)
					if err != nil {
						return err
					}
					link = rel
				}
			}
			return writePage(c, fsys, link, out)
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "results", "", "folder of results files (default: the committed ones, benchmarks/results, as this binary embeds them)")
	f.StringVar(&out, "out", "", "write the page to this file (default: standard output)")
	return cmd
}

// relativeLink is the folder dir as a link from the page file out.
func relativeLink(out, dir string) (string, error) {
	from, err := filepath.Abs(filepath.Dir(out))
	if err != nil {
		return "", fmt.Errorf("find %s: %w", out, err)
	}
	to, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("find %s: %w", dir, err)
	}
	rel, err := filepath.Rel(from, to)
	if err != nil {
		return "", fmt.Errorf("link %s from %s: %w", dir, out, err)
	}
	return filepath.ToSlash(rel), nil
}

func writePage(c *cobra.Command, fsys fs.FS, link, out string) error {
	sections, err := benchpage.Load(fsys, link)
	if err != nil {
		return err
	}
	page, err := benchpage.Render(sections)
	if err != nil {
		return err
	}
	if out == "" {
		_, err = c.OutOrStdout().Write(page)
		return err
	}
	if err := os.WriteFile(out, page, 0o644); err != nil {
		return fmt.Errorf("write the page: %w", err)
	}
	return nil
}
