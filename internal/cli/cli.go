// Package cli wires scalechat's subcommands to the packages that do the
// work. It parses flags and environment variables, sets up logging and
// signals, and turns errors into one clear sentence for the user.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// Main runs the scalechat command line with args and returns the process
// exit code.
func Main(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, args, os.Stdin, os.Stdout, os.Stderr)
}

// Exit codes of loadtest, also used by audit, analyze, bench compare and
// diff. One scheme: 1 and 2 say the command could not do what was asked
// (or, without --slo, that the run failed its own checks); 3 and 4 say it
// measured and the answer is no or cannot be trusted.
const (
	exitFailed       = 1   // could not run: connection errors, loss beyond --max-loss, a dead worker; diff: could not read or compare
	exitUsage        = 2   // bad flags or a plan the machine cannot hold
	exitMissed       = 3   // measured, and the answer is no: an SLO missed, or (diff --fail-on) a gated metric regressed
	exitInconclusive = 4   // measured, but an SLO could not be judged (generator saturated, figure not measured)
	exitInterrupted  = 130 // stopped by Ctrl+C without other failures
)

// exitError carries a specific exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd(stdin, stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintf(stderr, "scalechat: %v\n", ee.err)
		}
		return ee.code
	}
	fmt.Fprintf(stderr, "scalechat: %v\n", err)
	return 1
}

func newRootCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "scalechat",
		Short: "A real-time chat server that scales, and the load-testing lab that proves it",
		Long: `scalechat is a WebSocket chat server (rooms, broadcast, history, resume) built on an
event loop for a million connections per node, together with the tools to load test it:
loadtest, analyze, report and bench.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// A flag that does not parse is a bad flag like any other: exit 2.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{code: exitUsage, err: err} })
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newVersionCmd(), newServeCmd())
	root.AddCommand(newLoadtestCmd())
	root.AddCommand(newAnalyzeCmd())
	root.AddCommand(newReportCmd())
	root.AddCommand(newChatCmd())
	root.AddCommand(newTokenCmd())
	root.AddCommand(newBenchCmd())
	root.AddCommand(newClusterCmd())
	root.AddCommand(newAuditCmd())
	root.AddCommand(newDiffCmd())
	root.AddCommand(newPlanCmd())
	return root
}
