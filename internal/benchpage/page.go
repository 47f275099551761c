// Package benchpage generates docs/benchmarks.md from the results files of
// scalechat bench (benchmarks/results): one section per file, naming its
// machine, date, build and the command that measures it again, with a
// table of its rows. Prose that holds no figure lives in page.md.tmpl;
// every figure comes from a file, so the page cannot drift from them.
package benchpage

import (
	"bytes"
	_ "embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"text/template"

	"github.com/scalechat/scalechat/internal/results"
)

//go:embed page.md.tmpl
var pageTemplate string

// Section is one results file as the page shows it.
type Section struct {
	Name  string // the file's name in its folder
	Link  string // the file as a link from the page
	File  results.BenchFile
	Table string // the rows shown, a Markdown table
	Notes []string
	// Shown and Total count the rows on the page and in the file.
	Shown, Total int
}

// Title is the section's heading: the file's title, or its command.
func (s Section) Title() string {
	if s.File.Title != "" {
		return s.File.Title
	}
	return s.File.Command
}

// Load reads every results file (*.json) of fsys, oldest first (by date,
// then name), leaving out --smoke runs, whose figures mean nothing. link
// is the folder as a link from the page.
func Load(fsys fs.FS, link string) ([]Section, error) {
	names, err := fs.Glob(fsys, "*.json")
	if err != nil {
		return nil, fmt.Errorf("list the results files: %w", err)
	}
	var out []Section
	for _, n := range names {
		f, err := results.ReadBenchFS(fsys, n)
		if err != nil {
			return nil, err
		}
		if f.Smoke {
			continue
		}
		rows := pageRows(f)
		s := Section{Name: n, Link: path.Join(link, n), File: f, Table: table(rows), Shown: len(rows), Total: len(f.Rows)}
		for _, r := range rows {
			if r.Note != "" {
				s.Notes = append(s.Notes, r.Scenario+": "+r.Note)
			}
		}
		out = append(out, s)
	}
	slices.SortStableFunc(out, func(a, b Section) int { return strings.Compare(a.File.Date, b.File.Date) })
	if len(out) == 0 {
		return nil, fmt.Errorf("no results files (other than --smoke runs) to make a page of")
	}
	return out, nil
}

// pageRows returns the rows of f a page shows (BenchFile.PageRows).
func pageRows(f results.BenchFile) []results.BenchRow {
	if len(f.PageRows) == 0 {
		return f.Rows
	}
	var out []results.BenchRow
	for _, r := range f.Rows {
		if slices.ContainsFunc(f.PageRows, func(p string) bool { return strings.Contains(r.Scenario, p) }) {
			out = append(out, r)
		}
	}
	return out
}

// Render writes the page of the sections.
func Render(sections []Section) ([]byte, error) {
	t, err := template.New("page").Funcs(template.FuncMap{"cell": cell}).Parse(pageTemplate)
	if err != nil {
		return nil, fmt.Errorf("parse the page template: %w", err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, sections); err != nil {
		return nil, fmt.Errorf("render the page: %w", err)
	}
	return b.Bytes(), nil
}

// cell makes s safe inside a Markdown table cell.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return strings.ReplaceAll(s, "|", `\|`)
}
