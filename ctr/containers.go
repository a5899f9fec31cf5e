package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/evjournal/containerd/api/types"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

func containersCommand() *cli.Command {
	return &cli.Command{
		Name:      "containers",
		Usage:     "interact with running containers",
		ArgsUsage: "[ID]",
		Flags:     []cli.Flag{formatFlag},
		Subcommands: []*cli.Command{
			execCommand(),
			killCommand(),
			listCommand(),
			pauseCommand(),
			resumeCommand(),
			startCommand(),
			stateCommand(),
			statsCommand(),
			watchCommand(),
			updateCommand(),
		},
		Action: listContainers,
	}
}

func listCommand() *cli.Command {
	return &cli.Command{
		Name:      "list",
		Aliases:   []string{"ls"},
		Usage:     "list all running containers",
		ArgsUsage: "[ID]",
		Flags:     []cli.Flag{formatFlag},
		Action:    listContainers,
	}
}

// listContainers prints `ID  PATH  STATUS  PROCESSES`, sorted by id.
func listContainers(c *cli.Context) error {
	format, err := outputFormat(c)
	if err != nil {
		return err
	}
	return withClient(c, func(cl *client) error {
		resp, err := cl.State(context.Background(), &types.StateRequest{Id: c.Args().First()})
		if err != nil {
			return err
		}
		cs := resp.GetContainers()
		sort.Slice(cs, func(i, j int) bool { return cs[i].GetId() < cs[j].GetId() })
		if format == "json" {
			if cs == nil {
				cs = []*types.Container{}
			}
			return printJSON(stdout, cs)
		}
		return containerTable(stdout, cs)
	})
}

func containerTable(out io.Writer, cs []*types.Container) error {
	w := tabwriter.NewWriter(out, 20, 1, 3, ' ', 0)
	fmt.Fprint(w, "ID\tPATH\tSTATUS\tPROCESSES\n")
	for _, ct := range cs {
		var procs []string
		for _, p := range ct.GetProcesses() {
			procs = append(procs, p.GetPid())
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", ct.GetId(), ct.GetBundlePath(), ct.GetStatus(), strings.Join(procs, ","))
	}
	return w.Flush()
}

func stateCommand() *cli.Command {
	return &cli.Command{
		Name:      "state",
		Usage:     "get a raw dump of the containerd state",
		ArgsUsage: "[ID]",
		Action: func(c *cli.Context) error {
			return withClient(c, func(cl *client) error {
				resp, err := cl.State(context.Background(), &types.StateRequest{Id: c.Args().First()})
				if err != nil {
					return err
				}
				return printJSON(stdout, resp)
			})
		},
	}
}

func statsCommand() *cli.Command {
	return &cli.Command{
		Name:      "stats",
		Usage:     "get stats for a running container",
		ArgsUsage: "ID",
		Action: func(c *cli.Context) error {
			id, err := singleID(c)
			if err != nil {
				return err
			}
			return withClient(c, func(cl *client) error {
				resp, err := cl.Stats(context.Background(), &types.StatsRequest{Id: id})
				if err != nil {
					return err
				}
				return printCompactJSON(stdout, resp)
			})
		},
	}
}

func killCommand() *cli.Command {
	return &cli.Command{
		Name:      "kill",
		Usage:     "send a signal to a container or its processes",
		ArgsUsage: "ID",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "pid", Aliases: []string{"p"}, Value: "init", Usage: "process id inside the container"},
			&cli.StringFlag{Name: "signal", Aliases: []string{"s"}, Value: "15", Usage: "signal number or name (9, KILL, SIGKILL)"},
		},
		Action: func(c *cli.Context) error {
			id, err := singleID(c)
			if err != nil {
				return err
			}
			sig, err := parseSignal(c.String("signal"))
			if err != nil {
				return err
			}
			return withClient(c, func(cl *client) error {
				_, err := cl.Signal(context.Background(), &types.SignalRequest{Id: id, Pid: c.String("pid"), Signal: sig})
				return err
			})
		},
	}
}

// parseSignal accepts a number or a name with or without "SIG".
func parseSignal(s string) (uint32, error) {
	if n, err := parseUint(s); err == nil {
		if n > 64 {
			return 0, missing("invalid signal %q", s)
		}
		return uint32(n), nil
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return uint32(sig), nil
	}
	return 0, missing("invalid signal %q", s)
}

func pauseCommand() *cli.Command {
	return statusCommand("pause", "pause a container", "paused")
}

func resumeCommand() *cli.Command {
	return statusCommand("resume", "resume a paused container", "running")
}

func statusCommand(name, usage, status string) *cli.Command {
	return &cli.Command{
		Name:      name,
		Usage:     usage,
		ArgsUsage: "ID",
		Action: func(c *cli.Context) error {
			id, err := singleID(c)
			if err != nil {
				return err
			}
			return withClient(c, func(cl *client) error {
				_, err := cl.UpdateContainer(context.Background(), &types.UpdateContainerRequest{Id: id, Pid: "init", Status: status})
				return err
			})
		},
	}
}

// containerID is the first argument, which is required.
func containerID(c *cli.Context) (string, error) {
	id := c.Args().First()
	if id == "" {
		return "", missing("container id cannot be empty")
	}
	return id, nil
}

// singleID is the one argument of a command that takes only an ID. More
// arguments are an error: flag parsing stops at the first argument, so a
// flag written after the ID (`update ID --memory-limit N`) would otherwise
// be silently ignored.
func singleID(c *cli.Context) (string, error) {
	id, err := containerID(c)
	if err == nil && c.NArg() > 1 {
		return "", missing("unexpected arguments after the container id: %q (flags go before the id)", c.Args().Slice()[1:])
	}
	return id, err
}
