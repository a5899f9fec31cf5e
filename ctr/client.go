package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/evjournal/containerd/api/types"
	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
)

// client is a connection to the daemon.
type client struct {
	types.APIClient
	conn *grpc.ClientConn
}

func (c *client) Close() error { return c.conn.Close() }

// connect dials --address (proto://address, as the daemon's --listen). The
// connection is made by the first call, within --conn-timeout.
func connect(c *cli.Context) (*client, error) {
	if c.Bool("debug") {
		logrus.SetLevel(logrus.DebugLevel)
	}
	addr := c.String("address")
	proto, path, ok := strings.Cut(addr, "://")
	if !ok || path == "" {
		return nil, fmt.Errorf("--address %q: want proto://address, e.g. unix:///run/containerd/containerd.sock", addr)
	}
	if proto != "unix" && proto != "tcp" {
		return nil, fmt.Errorf("--address %q: unsupported protocol %q (want unix or tcp)", addr, proto)
	}
	timeout := c.Duration("conn-timeout")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var dialErr atomic.Value // the last dial's error, for the message
	dialer := func(ctx context.Context, _ string) (net.Conn, error) {
		d := net.Dialer{Timeout: timeout}
		conn, err := d.DialContext(ctx, proto, path)
		if err != nil {
			dialErr.Store(err)
			if nothingListens(err) {
				cancel() // no retry can succeed within the timeout
			}
		}
		return conn, err
	}
	conn, err := grpc.NewClient("passthrough:///containerd",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dialer))
	if err != nil {
		return nil, err
	}
	if err := waitReady(ctx, conn); err != nil {
		conn.Close()
		if derr, ok := dialErr.Load().(error); ok {
			return nil, fmt.Errorf("cannot connect to the daemon at %s: %w", addr, derr)
		}
		return nil, fmt.Errorf("the daemon at %s did not answer within %s (--conn-timeout): %w", addr, timeout, err)
	}
	return &client{APIClient: types.NewAPIClient(conn), conn: conn}, nil
}

// nothingListens reports a dial error that waiting will not cure: no
// socket at the path, nobody listening, no permission. v0.2.9's ctr failed
// on these at once; only a daemon that accepts but does not answer is
// waited for, up to --conn-timeout.
func nothingListens(err error) bool {
	for _, errno := range []syscall.Errno{syscall.ENOENT, syscall.ECONNREFUSED, syscall.EACCES, syscall.ENOTSOCK} {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}

// waitReady connects and waits, until ctx ends, for the connection to be
// ready, as v0.2's ctr did (a blocking dial): a daemon that is stopped
// (SIGSTOP) or hung accepts on its socket but never completes the
// handshake, and without this check every call would fail only after
// grpc's own 20 s with "use of closed network connection".
func waitReady(ctx context.Context, conn *grpc.ClientConn) error {
	conn.Connect()
	for {
		st := conn.GetState()
		if st == connectivity.Ready {
			return nil
		}
		if !conn.WaitForStateChange(ctx, st) {
			return fmt.Errorf("connection %s", strings.ToLower(st.String()))
		}
	}
}

// withClient runs f with a connection that is closed afterwards.
func withClient(c *cli.Context, f func(*client) error) error {
	cl, err := connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	return f(cl)
}
