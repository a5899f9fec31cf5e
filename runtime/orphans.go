package runtime

import (
	"context"
	"fmt"
	"os"

	gorunc "github.com/containerd/go-runc"
)

// RuncContainer is one container in a runc state root, as `runc list` shows it.
type RuncContainer struct {
	ID     string
	Status string // created, running, paused, stopped
}

// ListRunc lists the containers of a runc root (one `runc list` call).
func ListRunc(ctx context.Context, runtime string, args []string) ([]RuncContainer, error) {
	if runtime == "" {
		runtime = DefaultRuntime
	}
	if root, ok := runcRoot(runtime, args); ok {
		if _, err := os.Stat(root); os.IsNotExist(err) {
			return nil, nil // runc makes its root on first use: nothing yet
		}
	}
	r := &gorunc.Runc{Command: runtime, ExtraArgs: args}
	list, err := r.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("runc list: %w", parseRuncError("list", err))
	}
	out := make([]RuncContainer, 0, len(list))
	for _, c := range list {
		out = append(out, RuncContainer{ID: c.ID, Status: c.Status})
	}
	return out, nil
}

// DeleteRunc removes a stopped container's runc state (no --force: a
// container that still runs is refused by runc, never killed).
func DeleteRunc(ctx context.Context, runtime string, args []string, id string) error {
	if err := ValidateID(id); err != nil {
		return err
	}
	if runtime == "" {
		runtime = DefaultRuntime
	}
	r := &gorunc.Runc{Command: runtime, ExtraArgs: args}
	if err := r.Delete(ctx, id, &gorunc.DeleteOpts{}); err != nil {
		if re := parseRuncError("delete", err); runcNotExist(re.Output) {
			return nil
		}
		return fmt.Errorf("runc delete %s: %w", id, parseRuncError("delete", err))
	}
	return nil
}
