package cli

import (
	"github.com/spf13/cobra"

	"github.com/scalechat/scalechat/internal/terminal"
)

func newChatCmd() *cobra.Command {
	o := terminal.Options{URL: terminal.DefaultURL}
	cmd := &cobra.Command{
		Use:   "chat",
		Short: "Chat in a room from the terminal",
		Long: `Chat in a room of a scalechat server from the terminal: every line typed is posted to the
room, and the room's history and live messages are printed as "[15:04:05] name: text", in
local time of the server's timestamp (server_at), one message per line on stdout.

Without --name or --room it asks for them on stdin (prompts go to stderr; an empty room
means "lobby"). Connection states, notices and errors go to stderr. A broken connection is
reconnected with exponential backoff, and the messages missed meanwhile are replayed from
the server's history.

/quit, the end of input (Ctrl+D) or Ctrl+C leave the room and close the connection with
code 1000. It is scriptable: at the end of piped input it waits up to 5 s for the server
to echo the lines it sent, then leaves:

  printf 'alice\nroom1\nhello\n' | scalechat chat

Every flag has an environment variable twin, e.g. --url and SCALECHAT_URL.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.In, o.Out, o.Err = cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
			return terminal.Run(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.URL, "url", o.URL, "the server's WebSocket endpoint; the room is appended to it")
	f.StringVar(&o.Room, "room", "", "room to chat in; asked for when empty")
	f.StringVar(&o.Name, "name", "", "your name, shown with your messages; asked for when empty")
	f.IntVar(&o.MaxAttempts, "max-reconnects", 0, "failed reconnect attempts in a row before giving up; 0 means never give up")
	bindEnv(cmd)
	return cmd
}
