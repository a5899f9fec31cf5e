package main

import (
	"context"

	"github.com/evjournal/containerd/api/types"
	"github.com/urfave/cli/v2"
)

// watchCommand prints live events, of one container or all, until
// interrupted (v0.2.9 stopped after the first: docs/api.md 9.8).
func watchCommand() *cli.Command {
	return &cli.Command{
		Name:      "watch",
		Usage:     "print the events of a container, or of all, until interrupted",
		ArgsUsage: "[ID]",
		Flags:     []cli.Flag{formatFlag},
		Action: func(c *cli.Context) error {
			format, err := outputFormat(c)
			if err != nil {
				return err
			}
			id := c.Args().First()
			return withClient(c, func(cl *client) error {
				ctx := context.Background()
				if id != "" {
					if _, err := cl.State(ctx, &types.StateRequest{Id: id}); err != nil {
						return err
					}
				}
				p := newEventPrinter(stdout, format)
				return followEvents(ctx, cl, &types.EventsRequest{Id: id}, p.print)
			})
		},
	}
}
