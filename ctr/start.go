package main

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/evjournal/containerd/api/types"
	"github.com/urfave/cli/v2"
)

// stdioFlags let a detached process write to files instead of /dev/null.
var stdioFlags = []cli.Flag{
	&cli.StringFlag{Name: "stdin", Usage: "file the process reads as stdin (detached only; default /dev/null)"},
	&cli.StringFlag{Name: "stdout", Usage: "file the process's stdout goes to (detached only; default /dev/null)"},
	&cli.StringFlag{Name: "stderr", Usage: "file the process's stderr goes to (detached only; default /dev/null)"},
}

func startCommand() *cli.Command {
	return &cli.Command{
		Name:      "start",
		Usage:     "start a container",
		ArgsUsage: "ID BUNDLE",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "checkpoint", Aliases: []string{"c"}, Usage: "checkpoint to restore from"},
			&cli.StringFlag{Name: "checkpoint-dir", Usage: "directory of the checkpoint (default <bundle>/checkpoints)"},
			&cli.BoolFlag{Name: "attach", Aliases: []string{"a"}, Usage: "stream stdio and exit with the container's status"},
			&cli.StringSliceFlag{Name: "label", Aliases: []string{"l"}, Usage: "label for the container (repeatable)"},
			&cli.BoolFlag{Name: "no-pivot", Usage: "do not use pivot_root"},
			&cli.StringFlag{Name: "runtime", Aliases: []string{"r"}, Usage: "runtime binary (default: the daemon's --runtime and --runtime-args)"},
			&cli.StringSliceFlag{Name: "runtime-args", Usage: "global runtime argument, with --runtime (repeatable)"},
		}, stdioFlags...),
		Action: startContainer,
	}
}

func startContainer(c *cli.Context) error {
	req, err := createRequest(c)
	if err != nil {
		return err
	}
	return withClient(c, func(cl *client) error {
		send := func() error {
			_, err := cl.CreateContainer(context.Background(), req)
			return err
		}
		attach := func() (target, error) {
			tty, err := bundleTerminal(req.BundlePath)
			return target{id: req.Id, pid: "init", started: "start-container", tty: tty}, err
		}
		return launch(c, cl, &req.Stdin, &req.Stdout, &req.Stderr, attach, send)
	})
}

// launch sends a create or exec request: detached, with stdio from the
// flags (or /dev/null), or attached, with FIFOs streamed to the terminal
// until the process's exit, whose status becomes ctr's.
func launch(c *cli.Context, cl *client, stdin, stdout, stderr *string, attach func() (target, error), send func() error) error {
	if !c.Bool("attach") {
		if err := detachedStdio(c, stdin, stdout, stderr); err != nil {
			return err
		}
		return send()
	}
	if err := noStdioFiles(c); err != nil {
		return err
	}
	t, err := attach()
	if err != nil {
		return err
	}
	return runAttached(cl, t, func(in, out, errPath string) error {
		*stdin, *stdout, *stderr = in, out, errPath
		return send()
	})
}

// createRequest checks the arguments and builds the request. The runtime is
// sent only when the user names one, so by default the daemon's --runtime
// and --runtime-args apply (v0.2.9 always sent "runc", which dropped the
// daemon's --runtime-args: docs/api.md 9.8).
func createRequest(c *cli.Context) (*types.CreateContainerRequest, error) {
	id := c.Args().Get(0)
	if id == "" {
		return nil, missing("container id cannot be empty")
	}
	bundle := c.Args().Get(1)
	if bundle == "" {
		return nil, missing("bundle path cannot be empty")
	}
	if c.String("runtime") == "" && len(c.StringSlice("runtime-args")) > 0 {
		return nil, missing("--runtime-args needs --runtime (without it the daemon's own runtime arguments apply)")
	}
	abs, err := filepath.Abs(bundle)
	if err != nil {
		return nil, err
	}
	return &types.CreateContainerRequest{
		Id:            id,
		BundlePath:    abs,
		Checkpoint:    c.String("checkpoint"),
		CheckpointDir: absOrEmpty(c.String("checkpoint-dir")),
		Labels:        c.StringSlice("label"),
		NoPivotRoot:   c.Bool("no-pivot"),
		Runtime:       c.String("runtime"),
		RuntimeArgs:   c.StringSlice("runtime-args"),
	}, nil
}

// bundleTerminal reads process.terminal from the bundle's config.json. A
// missing file is left for the daemon to report.
func bundleTerminal(bundle string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var spec struct {
		Process *struct {
			Terminal bool `json:"terminal"`
		} `json:"process"`
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		return false, nil // the daemon reports a bad config.json better
	}
	return spec.Process != nil && spec.Process.Terminal, nil
}

// detachedStdio sets the stdio of a detached process: empty (the daemon
// uses /dev/null, so nothing ever blocks on an unread pipe: docs/api.md
// 9.9) or the files the user named. Output files are
// created (truncated, like a shell's >); an input file must exist.
func detachedStdio(c *cli.Context, stdin, stdout, stderr *string) error {
	var err error
	if *stdin, err = inputFile(c.String("stdin")); err != nil {
		return err
	}
	if *stdout, err = outputFile(c.String("stdout")); err != nil {
		return err
	}
	*stderr, err = outputFile(c.String("stderr"))
	return err
}

func inputFile(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(abs); err != nil {
		return "", err
	}
	return abs, nil
}

// outputFile makes path absolute and removes a regular file left there (a
// previous run's output, which --stdout FILE always replaced): the daemon
// writes only into a path that does not exist yet, creating it 0600.
func outputFile(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if st, err := os.Lstat(abs); err == nil && st.Mode().IsRegular() {
		if err := os.Remove(abs); err != nil {
			return "", err
		}
	}
	return abs, nil
}

// noStdioFiles rejects --stdin/--stdout/--stderr with --attach, where ctr's
// own stdio is used.
func noStdioFiles(c *cli.Context) error {
	for _, f := range []string{"stdin", "stdout", "stderr"} {
		if c.String(f) != "" {
			return missing("--%s cannot be used with --attach", f)
		}
	}
	return nil
}

func absOrEmpty(path string) string {
	if path == "" {
		return ""
	}
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}
