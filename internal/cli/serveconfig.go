//go:build linux

package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// configFlags are serve's --config and --check-config, and what the file
// gave.
type configFlags struct {
	path  string
	check bool
	file  configFile
	errs  []error // the file's, kept for --check-config to print
}

func (c *configFlags) define(f *pflag.FlagSet) {
	f.StringVar(&c.path, "config", "", "YAML file of flag values and room namespaces (docs/config.md); flags and environment variables override it")
	f.BoolVar(&c.check, "check-config", false, "validate the file (--config FILE, or FILE after this flag), print one line per error and exit: 0 valid, 2 not")
}

// serveArgs takes no argument, but the file to check after --check-config.
func serveArgs(o *serveFlags) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if o.config.check {
			return cobra.MaximumNArgs(1)(cmd, args)
		}
		return cobra.NoArgs(cmd, args)
	}
}

// readConfig reads the configuration file, if any, into the flags that the
// command line and the environment left. Its errors are kept: serve and
// --check-config report them with the settings' (configErrors).
func (o *serveFlags) readConfig(cmd *cobra.Command, args []string) error {
	c := &o.config
	if len(args) == 1 {
		if c.path != "" && c.path != args[0] {
			return &exitError{code: exitUsage, err: fmt.Errorf("two files to check: --config %s and %s; give one", c.path, args[0])}
		}
		c.path = args[0]
	}
	if c.path == "" {
		if c.check {
			return &exitError{code: exitUsage, err: errors.New("--check-config needs a file: scalechat serve --check-config FILE")}
		}
		return nil
	}
	c.file, c.errs = applyConfigFile(cmd.Flags(), c.path)
	return nil
}

// configErrors returns every error of the file and of the settings it
// makes with the command line and the environment, as serve would start
// with them: serve and --check-config report the same ones.
func (o *serveFlags) configErrors(cmd *cobra.Command, logger *slog.Logger) []error {
	// A value the file got wrong left its flag as it was (valid): the
	// settings are checked with the others all the same.
	errs := append([]error(nil), o.config.errs...)
	if err := o.serverConfig(logger); err != nil {
		// The server's checks would follow from what is missing (no
		// verifier: "checks no token"): they wait for these to be fixed.
		errs = append(errs, unjoin(err)...)
	} else if err := o.cfg.Validate(); err != nil {
		errs = append(errs, unjoin(err)...)
	}
	if _, err := newLogger(cmd.ErrOrStderr(), o.logLevel, o.logFormat); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// checkConfig validates the file and the settings it makes with the
// command line and the environment, as serve would start with them, and
// prints one line per error, or that the file is valid.
func checkConfig(cmd *cobra.Command, o *serveFlags) error {
	errs := o.configErrors(cmd, slog.New(slog.DiscardHandler))
	out := cmd.OutOrStdout()
	if len(errs) == 0 {
		n := len(o.config.file.namespaces)
		noun := "namespaces"
		if n == 1 {
			noun = "namespace"
		}
		fmt.Fprintf(out, "%s: valid, %d %s\n", o.config.path, n, noun)
		return nil
	}
	return invalidConfig(out, o.config.path, errs)
}

// invalidConfig prints errs, one a line, to w and returns the error that
// exits 2 saying how many there are: serve (to stderr) and --check-config
// (to stdout) say the same sentences. Without a file, one error is that
// line alone.
func invalidConfig(w io.Writer, path string, errs []error) error {
	if path == "" && len(errs) == 1 { // a flag alone: its sentence is the one line
		return &exitError{code: exitUsage, err: errs[0]}
	}
	fmt.Fprintln(w, errorLines(path, errs))
	plural := "s"
	if len(errs) == 1 {
		plural = ""
	}
	what := path
	if what == "" {
		what = "the configuration"
	}
	return &exitError{code: exitUsage, err: fmt.Errorf("%s is not valid: %d error%s", what, len(errs), plural)}
}

// errorLines writes one error a line, each after the file's name when
// there is a file.
func errorLines(path string, errs []error) string {
	lines := make([]string, len(errs))
	for i, e := range errs {
		lines[i] = e.Error()
		if path != "" {
			lines[i] = path + ": " + lines[i]
		}
	}
	return strings.Join(lines, "\n")
}

// unjoin returns the errors errors.Join joined (server.Config's checks),
// or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var errs []error
		for _, e := range j.Unwrap() {
			errs = append(errs, unjoin(e)...)
		}
		return errs
	}
	return []error{err}
}
