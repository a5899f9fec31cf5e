// Command ctr is the command line client of the containerd v0.2 API: the
// command tree and flags of v0.2.9's ctr (docs/api.md section 6), with its
// bugs fixed and a few additions (events --since/--id/--stored-only/
// --after-seq, --format on listings).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/evjournal/containerd/api"
	"github.com/urfave/cli/v2"
)

// ctr's stdio; tests replace them.
var (
	stdin  io.Reader = os.Stdin
	stdout io.Writer = os.Stdout
	stderr io.Writer = os.Stderr
)

func main() {
	os.Exit(exitCode(newApp().Run(os.Args), stderr))
}

func newApp() *cli.App {
	app := &cli.App{
		Name:    "ctr",
		Usage:   "command line client for containerd",
		Version: api.Version(),
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "debug", Usage: "enable debug output in the logs"},
			&cli.StringFlag{Name: "address", Value: "unix:///run/containerd/containerd.sock", Usage: "proto://address of the containerd API"},
			&cli.DurationFlag{Name: "conn-timeout", Value: time.Second, Usage: "timeout for connecting to the API"},
		},
		Commands: []*cli.Command{
			checkpointCommand(),
			containersCommand(),
			eventsCommand(),
			stateCommand(),
			versionCommand(),
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("unknown command %q", c.Args().First())
			}
			return cli.ShowAppHelp(c)
		},
		DisableSliceFlagSeparator: true,
		HideHelpCommand:           true,
		// Errors are printed once, by exitCode; urfave/cli must not exit itself.
		ExitErrHandler: func(*cli.Context, error) {},
	}
	quietUsageErrors(app.Commands)
	app.OnUsageError = usageErr
	return app
}

// usageErr makes a flag parsing error an ordinary error (message, exit 1)
// instead of the usage text on stdout.
func usageErr(_ *cli.Context, err error, _ bool) error { return err }

func quietUsageErrors(cmds []*cli.Command) {
	for _, c := range cmds {
		c.OnUsageError = usageErr
		quietUsageErrors(c.Subcommands)
	}
}

// usageError is a missing or bad argument: printed as "[ctr] <message>", as
// v0.2.9 did.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func missing(format string, a ...any) error { return &usageError{msg: fmt.Sprintf(format, a...)} }

// exitStatus ends ctr with a process's exit status, silently.
type exitStatus struct{ code int }

func (e *exitStatus) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// exitCode prints err (if any) on w and returns the process exit code.
func exitCode(err error, w io.Writer) int {
	var es *exitStatus
	var ue *usageError
	var ce cli.ExitCoder
	switch {
	case err == nil:
		return 0
	case errors.As(err, &es):
		return es.code
	case errors.As(err, &ue):
		fmt.Fprintf(w, "[ctr] %s\n", ue.msg)
		return 1
	case errors.As(err, &ce) && ce.ExitCode() != 0:
		if msg := err.Error(); msg != "" {
			fmt.Fprintf(w, "ctr: %s\n", msg)
		}
		return 1
	}
	fmt.Fprintf(w, "ctr: %v\n", err)
	return 1
}
