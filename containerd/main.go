// Command containerd is the daemon: it serves the containerd v0.2 gRPC API on
// a unix socket and runs OCI containers through runc and containerd-shim.
//
// main only parses flags and wires the pieces together: the state dir and
// its lock, the listener, the supervisor, the API server, signals, logs and
// metrics.
package main

import (
	"fmt"
	"os"

	"github.com/evjournal/containerd/api"
	"github.com/urfave/cli/v2"
)

func main() {
	if err := newApp().Run(os.Args); err != nil {
		fmt.Fprintf(os.Stderr, "containerd: %v\n", err)
		os.Exit(1)
	}
}

func newApp() *cli.App {
	return &cli.App{
		Name:    "containerd",
		Usage:   "standalone OCI container supervisor with a persistent event journal",
		Version: api.Version(),
		Description: "Access to the API socket is root-equivalent: a client can name any program as a " +
			"container's runtime, which the daemon runs as uid 0. Give --socket-group only to trusted users.",
		Flags: flags(),
		// A --runtime-args value such as --foo=a,b stays one argument.
		DisableSliceFlagSeparator: true,
		HideHelpCommand:           true,
		// A bad flag gives an error message and exit code 1, not the usage text.
		OnUsageError: func(_ *cli.Context, err error, _ bool) error { return err },
		Action:       action,
	}
}

func action(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: containerd takes flags only", c.Args().Slice())
	}
	cfg, err := configFrom(c)
	if err != nil {
		return err
	}
	cfg.chooseBinaries(executableDir())
	log, err := setupLogging(os.Stderr, cfg.logLevel, cfg.debug, cfg.logFormat)
	if err != nil {
		return err
	}
	return run(cfg, log)
}
