package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
)

// Runc is bare runc on a private --root: the floor every daemon timing is
// compared with, and the cleanup of last resort.
type Runc struct {
	Bin  string
	Root string
}

// run runs runc with its output in a temp file, not a pipe: `runc create`
// hands its stdio to the container, and a pipe would then stay open (and
// the wait for runc hang) for the container's whole life.
func (r Runc) run(ctx context.Context, args ...string) error {
	out, err := os.CreateTemp("", "runc-out-")
	if err != nil {
		return err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd := exec.CommandContext(ctx, r.Bin, append([]string{"--root", r.Root}, args...)...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		msg, _ := os.ReadFile(out.Name())
		return fmt.Errorf("runc %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(msg)))
	}
	return nil
}

// Create is `runc create --bundle B --pid-file P ID`, the container's stdio
// being /dev/null, as a shim's would be without client paths.
func (r Runc) Create(ctx context.Context, id, bundle, pidFile string) error {
	return r.run(ctx, "create", "--bundle", bundle, "--pid-file", pidFile, id)
}

// Start is `runc start ID`.
func (r Runc) Start(ctx context.Context, id string) error { return r.run(ctx, "start", id) }

// Run is Create then Start.
func (r Runc) Run(ctx context.Context, id, bundle, pidFile string) error {
	if err := r.Create(ctx, id, bundle, pidFile); err != nil {
		return err
	}
	return r.Start(ctx, id)
}

// Resume is `runc resume ID`.
func (r Runc) Resume(ctx context.Context, id string) error { return r.run(ctx, "resume", id) }

// DeleteForce is `runc delete --force ID`.
func (r Runc) DeleteForce(id string) error {
	return r.run(context.Background(), "delete", "--force", id)
}

// IDs lists the containers of the root (its directories).
func (r Runc) IDs() []string {
	entries, _ := os.ReadDir(r.Root)
	var ids []string
	for _, e := range entries {
		if e.IsDir() {
			ids = append(ids, e.Name())
		}
	}
	return ids
}

// DeleteAll force-deletes every container of the root, 8 at a time.
func (r Runc) DeleteAll() {
	ids := r.IDs()
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			// A paused container cannot be killed until thawed.
			r.run(context.Background(), "resume", id)
			r.DeleteForce(id)
		}()
	}
	wg.Wait()
}

// List is `runc list` (the cost of asking runc about every container).
func (r Runc) List() error { return r.run(context.Background(), "list", "-q") }
