// Package scenarios holds the scenario files (*.yaml) as the binary embeds
// them: `scalechat bench NAME` runs the file whose bench: section and name
// say NAME from any directory, and scalechat loadtest --scenario reads any
// of them from disk. docs/loadtest.md describes the format, and
// docs/benchmarks.md how a file becomes a benchmark.
package scenarios

import (
	"embed"
	"io/fs"
)

//go:embed *.yaml
var files embed.FS

// Files is the folder of scenario files.
func Files() fs.FS { return files }
