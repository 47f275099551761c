// Package benchmarks holds the committed results of scalechat bench
// (results/*.json, one file per measurement, each naming its machine,
// date, commit and the command that measures it again). They are the
// figures docs/benchmarks.md is generated from and the costs scalechat
// plan prices a workload with: a figure lives in a results file, never
// in prose.
//
// After adding or changing a results file, regenerate the page:
//
//	go generate ./benchmarks
package benchmarks

import (
	"embed"
	"io/fs"
)

//go:generate go run ../cmd/scalechat bench page --results results --out ../docs/benchmarks.md

//go:embed results/*.json
var files embed.FS

// Results is the folder of committed results files, as the binary embeds
// it.
func Results() fs.FS {
	sub, err := fs.Sub(files, "results")
	if err != nil {
		panic(err) // the embed pattern above names the folder: it is always there
	}
	return sub
}
