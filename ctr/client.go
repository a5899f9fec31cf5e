package main

import (
	"context"
	"fmt"
	"net"
	"strings"

	"github.com/evjournal/containerd/api/types"
	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"
	"google.golang.org/grpc"
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
	dialer := func(ctx context.Context, _ string) (net.Conn, error) {
		d := net.Dialer{Timeout: timeout}
		return d.DialContext(ctx, proto, path)
	}
	conn, err := grpc.NewClient("passthrough:///containerd",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dialer))
	if err != nil {
		return nil, err
	}
	return &client{APIClient: types.NewAPIClient(conn), conn: conn}, nil
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
