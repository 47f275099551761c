package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/scalechat/scalechat/internal/auth"
)

func newTokenCmd() *cobra.Command {
	var (
		secret, sub, rooms string
		ttl                = time.Hour
	)
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Mint an HS256 JWT for testing a server started with --auth-jwt-secret",
		Long: `Mint an HS256 JSON Web Token: its sub becomes the sender of every message of the
connection, its rooms (when given) are the only rooms it may join, and it expires after --ttl.

  scalechat token --secret "$SECRET" --sub alice --rooms a,b --ttl 1h
  wscat -c "ws://127.0.0.1:8080/ws/a?token=$(scalechat token --secret "$SECRET" --sub alice)"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if secret == "" || sub == "" {
				return errors.New("--secret and --sub are required")
			}
			var list []string
			if rooms != "" {
				list = strings.Split(rooms, ",")
			}
			tok, err := auth.MintHS256([]byte(secret), sub, list, ttl)
			if err != nil {
				return fmt.Errorf("mint token: %w", err)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), tok)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&secret, "secret", "", "the server's --auth-jwt-secret")
	f.StringVar(&sub, "sub", "", "user name: the sender of every message")
	f.StringVar(&rooms, "rooms", "", "comma-separated rooms the token allows; empty allows any")
	f.DurationVar(&ttl, "ttl", ttl, "how long the token is valid")
	bindEnv(cmd)
	return cmd
}
