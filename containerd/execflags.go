package main

import (
	"fmt"

	"github.com/docker/go-units"
	criserver "github.com/evjournal/containerd/cri/server"
	"github.com/urfave/cli/v2"
)

// execSyncFlags bound what the CRI's ExecSync holds in memory (docs/cri.md).
func execSyncFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "exec-sync-output-budget", Value: units.BytesSize(criserver.DefaultExecOutputBudget),
			Usage: "ExecSync output the CRI service holds in memory at once, all calls together (e.g. 16MiB); output beyond it is dropped from the replies"},
	}
}

// execSyncBudgetFrom reads execSyncFlags.
func execSyncBudgetFrom(c *cli.Context) (int64, error) {
	v := c.String("exec-sync-output-budget")
	size, err := units.RAMInBytes(v)
	if err != nil || size <= 0 {
		return 0, fmt.Errorf("--exec-sync-output-budget %q: want a size such as 16MiB or 1GiB", v)
	}
	return size, nil
}
