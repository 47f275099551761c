module github.com/scalechat/scalechat

go 1.26.0

require (
	github.com/gobwas/ws v1.5.0
	github.com/spf13/cobra v1.10.2
	github.com/spf13/pflag v1.0.9
	golang.org/x/sys v0.49.0
)

require (
	github.com/gobwas/httphead v0.1.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
)
