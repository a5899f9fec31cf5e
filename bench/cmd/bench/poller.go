package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/evjournal/containerd/api/types"
)

// pollerEnv, when set to "<socket> <clients>", makes the bench binary a
// crowd of State pollers instead: <clients> connections, each calling State
// (all containers) in a loop, one call at a time, until its stdin closes;
// then it prints the number of replies. The pollers run in a process of
// their own, as real clients do, so their CPU is not the measuring
// subscriber's.
const pollerEnv = "CTRD_BENCH_STATE_POLLERS"

// runPollers is the child's main.
func runPollers(spec string) int {
	f := strings.Fields(spec)
	if len(f) != 2 {
		fmt.Fprintln(os.Stderr, "pollers: want \"<socket> <clients>\"")
		return 2
	}
	n, err := strconv.Atoi(f[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "pollers:", err)
		return 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var polls atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		conn, err := grpc.NewClient("unix://"+f[0], grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", f[0])
			}))
		if err != nil {
			fmt.Fprintln(os.Stderr, "pollers:", err)
			return 1
		}
		defer conn.Close()
		c := types.NewAPIClient(conn)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if _, err := c.State(ctx, &types.StateRequest{}); err == nil {
					polls.Add(1)
				}
			}
		}()
	}
	io.Copy(io.Discard, os.Stdin)
	cancel()
	wg.Wait()
	fmt.Println(polls.Load())
	return 0
}

// statePollers is a running poller process.
type statePollers struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   strings.Builder
}

// startStatePollers starts the poller child against socket.
func startStatePollers(socket string, clients int) (*statePollers, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	p := &statePollers{cmd: exec.Command(self)}
	p.cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d", pollerEnv, socket, clients))
	p.cmd.Stdout, p.cmd.Stderr = &p.out, os.Stderr
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	return p, nil
}

// stop ends the pollers and returns how many State replies they got.
func (p *statePollers) stop() (int64, error) {
	p.stdin.Close()
	if err := p.cmd.Wait(); err != nil {
		return 0, fmt.Errorf("state pollers: %w", err)
	}
	return strconv.ParseInt(strings.TrimSpace(p.out.String()), 10, 64)
}
