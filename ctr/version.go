package main

import (
	"context"
	"fmt"

	"github.com/evjournal/containerd/api/types"
	"github.com/urfave/cli/v2"
)

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the daemon's version",
		Action: func(c *cli.Context) error {
			return withClient(c, func(cl *client) error {
				v, err := cl.GetServerVersion(context.Background(), &types.GetServerVersionRequest{})
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "daemon version %d.%d.%d commit: %s\n", v.GetMajor(), v.GetMinor(), v.GetPatch(), v.GetRevision())
				return nil
			})
		},
	}
}
