// Command scalechat is a real-time chat server and the load-testing lab that
// proves it. See README.md, or run "scalechat --help".
package main

import (
	"os"

	"github.com/scalechat/scalechat/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:]))
}
