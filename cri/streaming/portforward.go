package streaming

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"syscall"

	"github.com/containerd/errdefs"

	"github.com/evjournal/containerd/podnet"
)

// ForwardInNetNS connects to port on the loopback of the network namespace
// pinned at netnsPath (127.0.0.1 first, then ::1) and copies between that
// connection and stream. An end of input on either side is passed on as a
// half close, as TCP does, so a client's request still gets its answer; it
// returns when both directions are done or ctx is.
func ForwardInNetNS(ctx context.Context, netnsPath string, port int32, stream io.ReadWriteCloser) error {
	if err := checkPort(port); err != nil {
		return err
	}
	ns, err := podnet.OpenNetNS(netnsPath)
	if err != nil {
		return fmt.Errorf("port forward: %w", err)
	}
	conn, err := dialLoopback(ctx, ns, port)
	if err != nil {
		return err
	}
	return splice(ctx, conn, stream)
}

// dialLoopback creates the socket on a thread inside the namespace; the
// socket stays there whichever thread uses it later. The addresses are
// literals and dialled one by one: resolving "localhost" or racing two
// dials could run on other goroutines, outside the namespace.
func dialLoopback(ctx context.Context, ns *podnet.NetNS, port int32) (*net.TCPConn, error) {
	var conn *net.TCPConn
	var dialErr error
	err := ns.Do(func() error {
		for _, host := range []string{"127.0.0.1", "::1"} {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(int(port))))
			if err == nil {
				conn = c.(*net.TCPConn)
				return nil
			}
			if dialErr == nil {
				dialErr = err
			} else {
				dialErr = fmt.Errorf("%w; %w", dialErr, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("port forward to %d: %w", port, err)
	}
	if dialErr != nil {
		return nil, fmt.Errorf("port forward: nothing answers on port %d in netns %s: %w: %w", port, ns.Path(), errdefs.ErrUnavailable, dialErr)
	}
	return conn, nil
}

// splice copies both ways between conn and stream. When the pod's side
// ends, stream is closed (an EOF for the client) and the client's own close
// is awaited, so no goroutine outlives the call.
func splice(ctx context.Context, conn *net.TCPConn, stream io.ReadWriteCloser) error {
	defer conn.Close()
	// Cancellation must unblock both reads: closing conn ends the read
	// from the pod, a reset of the stream the read from the client (a
	// close of a SPDY stream only ends our writing half).
	stop := context.AfterFunc(ctx, func() {
		conn.Close()
		abort(stream)
	})
	defer stop()

	up := make(chan error, 1)
	go func() {
		_, err := io.Copy(conn, stream)
		// The client sent all it will: the pod sees EOF and may answer.
		_ = conn.CloseWrite()
		up <- err
	}()
	_, downErr := io.Copy(stream, conn)
	_ = stream.Close()
	upErr := <-up
	if ctx.Err() != nil {
		return fmt.Errorf("port forward: %w", ctx.Err())
	}
	if err := errors.Join(downErr, benign(upErr)); err != nil {
		return fmt.Errorf("port forward: %w", err)
	}
	return nil
}

// benign drops the error of a client still sending to a pod that has
// closed its side: the pod's answer is complete, nothing is lost for it.
func benign(err error) error {
	if errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

func abort(stream io.Closer) {
	if r, ok := stream.(interface{ Reset() error }); ok {
		_ = r.Reset()
		return
	}
	_ = stream.Close()
}
