package scratch

import (
	"context"
	"fmt"
	"testing"
	"time"
	"path/filepath"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/bench/internal/harness"
)

func TestScratch(t *testing.T) {
	env, err := harness.NewEnv("/dev/shm", "scratch-")
	if err != nil { t.Fatal(err) }
	defer func() { fmt.Println("leaks", env.Close()) }()
	b, err := env.Bundle("sleep")
	if err != nil { t.Fatal(err) }
	d, err := env.NewDaemon("d")
	if err != nil { t.Fatal(err) }
	t0 := time.Now()
	if err := d.Start(); err != nil { t.Fatal(err) }
	fmt.Println("daemon start", time.Since(t0))
	ctx := context.Background()
	r := harness.Runc{Bin: env.Bins.Runc, Root: env.Path("runc-bare")}
	for i := 0; i < 5; i++ {
		t0 = time.Now()
		_, err := d.Client.CreateContainer(ctx, &types.CreateContainerRequest{Id: fmt.Sprint("c", i), BundlePath: b})
		fmt.Println("daemon create", time.Since(t0), err)
		t0 = time.Now()
		err = r.Run(ctx, fmt.Sprint("r", i), b, filepath.Join(env.Dir, fmt.Sprint("pid", i)))
		fmt.Println("runc create+start", time.Since(t0), err)
	}
	t0 = time.Now()
	n := 0
	for time.Since(t0) < 3*time.Second {
		_, err := d.Client.UpdateContainer(ctx, &types.UpdateContainerRequest{Id: "c0", Status: "paused"})
		if err != nil { t.Fatal(err) }
		_, err = d.Client.UpdateContainer(ctx, &types.UpdateContainerRequest{Id: "c0", Status: "running"})
		if err != nil { t.Fatal(err) }
		n += 2
	}
	fmt.Println("pause/resume sequential per s", float64(n)/time.Since(t0).Seconds())
	for _, s := range env.Shims(d.StateDir) {
		rss, pss, _ := harness.SmapsRollup(s.Pid)
		fmt.Println("shim", s.Pid, s.Args, rss, pss)
	}
	g, err := d.Goroutines()
	fmt.Println("goroutines", g, err)
	t0 = time.Now()
	st, err := d.Client.State(ctx, &types.StateRequest{})
	fmt.Println("state", time.Since(t0), len(st.GetContainers()), err)
}
