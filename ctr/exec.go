package main

import (
	"context"

	"github.com/evjournal/containerd/api/types"
	"github.com/urfave/cli/v2"
)

// defaultPath is the PATH an exec gets when no --env is given: nothing is
// inherited from the container's config (docs/api.md 2.3), and without a
// PATH the runtime cannot find a bare command name.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func execCommand() *cli.Command {
	return &cli.Command{
		Name:      "exec",
		Usage:     "exec another process in an existing container",
		ArgsUsage: "[--] ARGS...",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "id", Usage: "container id"},
			&cli.StringFlag{Name: "pid", Usage: "process id of the new process (unique in the container)"},
			&cli.BoolFlag{Name: "attach", Aliases: []string{"a"}, Usage: "stream stdio and exit with the process's status"},
			&cli.StringFlag{Name: "cwd", Value: "/", Usage: "working directory inside the container"},
			&cli.BoolFlag{Name: "tty", Aliases: []string{"t"}, Usage: "give the process a terminal"},
			&cli.StringSliceFlag{Name: "env", Aliases: []string{"e"}, Usage: "KEY=value environment entry (repeatable; default: a standard PATH only)"},
			&cli.UintFlag{Name: "uid", Aliases: []string{"u"}, Usage: "user id"},
			&cli.UintFlag{Name: "gid", Aliases: []string{"g"}, Usage: "group id"},
			&cli.StringSliceFlag{Name: "cap", Usage: "capability such as CAP_KILL (repeatable; default: none)"},
		}, stdioFlags...),
		Action: execProcess,
	}
}

func execProcess(c *cli.Context) error {
	req, err := addProcessRequest(c)
	if err != nil {
		return err
	}
	return withClient(c, func(cl *client) error {
		send := func() error {
			_, err := cl.AddProcess(context.Background(), req)
			return err
		}
		attach := func() (target, error) {
			return target{id: req.Id, pid: req.Pid, started: "start-process", tty: req.Terminal}, nil
		}
		return launch(c, cl, &req.Stdin, &req.Stdout, &req.Stderr, attach, send)
	})
}

func addProcessRequest(c *cli.Context) (*types.AddProcessRequest, error) {
	switch {
	case c.String("id") == "":
		return nil, missing("container id cannot be empty")
	case c.String("pid") == "":
		return nil, missing("process id cannot be empty")
	case c.NArg() == 0:
		return nil, missing("process args cannot be empty")
	}
	env := c.StringSlice("env")
	if len(env) == 0 {
		env = []string{defaultPath}
	}
	return &types.AddProcessRequest{
		Id:           c.String("id"),
		Pid:          c.String("pid"),
		Args:         c.Args().Slice(),
		Cwd:          c.String("cwd"),
		Terminal:     c.Bool("tty"),
		Env:          env,
		User:         &types.User{Uid: uint32(c.Uint("uid")), Gid: uint32(c.Uint("gid"))},
		Capabilities: c.StringSlice("cap"),
	}, nil
}
