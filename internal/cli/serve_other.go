//go:build !linux

package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

func newServeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Run the chat server (Linux only for now)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("scalechat serve needs Linux: its event loop is built on epoll")
		},
	}
}
