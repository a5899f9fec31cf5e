package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/evjournal/containerd/api/types"
	"github.com/urfave/cli/v2"
)

var checkpointDirFlag = &cli.StringFlag{Name: "checkpoint-dir", Usage: "directory of the checkpoints (default <bundle>/checkpoints)"}

func checkpointCommand() *cli.Command {
	return &cli.Command{
		Name:      "checkpoints",
		Usage:     "list, create and delete checkpoints of a container",
		ArgsUsage: "ID",
		Flags:     []cli.Flag{checkpointDirFlag, formatFlag},
		Subcommands: []*cli.Command{
			{
				Name:      "list",
				Usage:     "list the checkpoints of a container",
				ArgsUsage: "ID",
				Flags:     []cli.Flag{checkpointDirFlag, formatFlag},
				Action:    listCheckpoints,
			},
			{
				Name:      "create",
				Usage:     "checkpoint a container",
				ArgsUsage: "ID NAME",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "exit", Usage: "stop the container after the checkpoint"},
					&cli.BoolFlag{Name: "tcp", Usage: "include established TCP connections"},
					&cli.BoolFlag{Name: "unix-sockets", Usage: "allow external unix sockets"},
					&cli.BoolFlag{Name: "shell", Usage: "the container is a shell job"},
					&cli.StringSliceFlag{Name: "empty-ns", Usage: "namespace to create empty on restore (repeatable)"},
					checkpointDirFlag,
				},
				Action: createCheckpoint,
			},
			{
				Name:      "delete",
				Usage:     "delete a checkpoint",
				ArgsUsage: "ID NAME",
				Flags:     []cli.Flag{checkpointDirFlag},
				Action:    deleteCheckpoint,
			},
		},
		Action: listCheckpoints,
	}
}

// listCheckpoints prints `NAME  TCP  UNIX SOCKETS  SHELL`.
func listCheckpoints(c *cli.Context) error {
	id, err := containerID(c)
	if err != nil {
		return err
	}
	format, err := outputFormat(c)
	if err != nil {
		return err
	}
	return withClient(c, func(cl *client) error {
		resp, err := cl.ListCheckpoint(context.Background(), &types.ListCheckpointRequest{
			Id: id, CheckpointDir: absOrEmpty(c.String("checkpoint-dir"))})
		if err != nil {
			return err
		}
		cps := resp.GetCheckpoints()
		if format == "json" {
			if cps == nil {
				cps = []*types.Checkpoint{}
			}
			return printJSON(stdout, cps)
		}
		w := tabwriter.NewWriter(stdout, 20, 1, 3, ' ', 0)
		fmt.Fprint(w, "NAME\tTCP\tUNIX SOCKETS\tSHELL\n")
		for _, cp := range cps {
			fmt.Fprintf(w, "%s\t%v\t%v\t%v\n", cp.GetName(), cp.GetTcp(), cp.GetUnixSockets(), cp.GetShell())
		}
		return w.Flush()
	})
}

// checkpointArgs returns the required ID and NAME.
func checkpointArgs(c *cli.Context) (id, name string, err error) {
	if id, err = containerID(c); err != nil {
		return "", "", err
	}
	if name = c.Args().Get(1); name == "" {
		return "", "", missing("checkpoint name cannot be empty")
	}
	return id, name, nil
}

func createCheckpoint(c *cli.Context) error {
	id, name, err := checkpointArgs(c)
	if err != nil {
		return err
	}
	return withClient(c, func(cl *client) error {
		_, err := cl.CreateCheckpoint(context.Background(), &types.CreateCheckpointRequest{
			Id: id,
			Checkpoint: &types.Checkpoint{
				Name:        name,
				Exit:        c.Bool("exit"),
				Tcp:         c.Bool("tcp"),
				UnixSockets: c.Bool("unix-sockets"),
				Shell:       c.Bool("shell"),
				EmptyNS:     c.StringSlice("empty-ns"),
			},
			CheckpointDir: absOrEmpty(c.String("checkpoint-dir")),
		})
		return err
	})
}

func deleteCheckpoint(c *cli.Context) error {
	id, name, err := checkpointArgs(c)
	if err != nil {
		return err
	}
	return withClient(c, func(cl *client) error {
		_, err := cl.DeleteCheckpoint(context.Background(), &types.DeleteCheckpointRequest{
			Id: id, Name: name, CheckpointDir: absOrEmpty(c.String("checkpoint-dir"))})
		return err
	})
}
