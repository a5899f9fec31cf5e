package streaming

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/vishvananda/netlink"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/evjournal/containerd/podnet"
)

// echoInNetNS starts, in a new network namespace, a TCP server on the
// loopback that greets each connection with "hello\n" and then echoes what
// it reads until the client's EOF. It returns the namespace's path and the
// port; the cleanup waits for every connection's goroutine.
func echoInNetNS(t *testing.T) (string, int32) {
	t.Helper()
	needRoot(t)
	ns, err := podnet.NewNetNS(t.TempDir(), "pf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Remove() })
	var l net.Listener
	err = ns.Do(func() error {
		// A new namespace's loopback is down; CNI's loopback plugin
		// brings it up in a real pod.
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(lo); err != nil {
			return err
		}
		l, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				if _, err := io.WriteString(c, "hello\n"); err == nil {
					io.Copy(c, c)
				}
			})
		}
	})
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
	})
	return ns.Path(), int32(l.Addr().(*net.TCPAddr).Port)
}

func spdyDialer(t *testing.T, rawURL string) httpstream.Dialer {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	rt, upgrader, err := spdy.RoundTripperFor(&rest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: rt}, "POST", u)
}

// TestPortForward goes through kubectl port-forward's client: a local
// listener whose connections are forwarded to the pod's port.
func TestPortForward(t *testing.T) {
	f := newFakeRuntime()
	var port int32
	f.netns, port = echoInNetNS(t)
	s := startServer(t, f)

	resp, err := s.GetPortForward(&runtimeapi.PortForwardRequest{PodSandboxId: "pod1", Port: []int32{port}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan struct{})
	pf, err := portforward.NewOnAddressesForStreamingWithContext(ctx, spdyDialer(t, resp.Url), []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", port)}, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	forwarding := make(chan error, 1)
	go func() { forwarding <- pf.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-forwarding:
		t.Fatalf("port forward: %v", err)
	}
	ports, err := pf.GetPorts()
	if err != nil {
		t.Fatal(err)
	}
	local := fmt.Sprintf("127.0.0.1:%d", ports[0].Local)

	// Two connections over the one URL: the pod speaks first, then
	// echoes, and answers after the client's half close.
	for i := range 2 {
		c := dialLocal(t, local)
		msg := fmt.Sprintf("ping %d\n", i)
		if _, err := io.WriteString(c, msg); err != nil {
			t.Fatal(err)
		}
		if err := c.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		rest, err := io.ReadAll(c)
		if err != nil || string(rest) != msg {
			t.Fatalf("echo %q, %v; want %q", rest, err, msg)
		}
		c.Close()
	}

	// Stop with a forwarded connection open: it ends, and so does the
	// client's forwarder (startServer's cleanup counts the goroutines).
	c := dialLocal(t, local)
	defer c.Close()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if rest, err := io.ReadAll(c); len(rest) != 0 {
		t.Errorf("read after stop: %q, %v", rest, err)
	}
	cancel()
	recv(t, forwarding, "forwarder end")
}

// dialLocal connects to the forwarder and reads the pod's greeting, which
// proves the connection reached the pod.
func dialLocal(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "hello\n" {
		t.Fatalf("greeting %q, %v", line, err)
	}
	return c
}

// TestPortForwardErrors speaks the port-forward protocol directly, to read
// the error stream that kubectl only logs.
func TestPortForwardErrors(t *testing.T) {
	f := newFakeRuntime()
	var port int32
	f.netns, port = echoInNetNS(t)
	s := startServer(t, f)

	for _, tc := range []struct {
		name    string
		sandbox string
		port    int32
		want    string
	}{
		{"unknown sandbox", "nope", port, `sandbox "nope": not found`},
		{"closed port", "pod1", port + 1, "nothing answers on port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := s.GetPortForward(&runtimeapi.PortForwardRequest{PodSandboxId: tc.sandbox})
			if err != nil {
				t.Fatal(err)
			}
			dialer := spdyDialer(t, resp.Url)
			conn, _, err := dialer.Dial(portforward.PortForwardProtocolV1Name)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			msg := forwardError(t, conn, tc.port)
			if !strings.Contains(msg, tc.want) {
				t.Errorf("error stream %q, want %q", msg, tc.want)
			}

			// The URL was for one connection only.
			if _, _, err := dialer.Dial(portforward.PortForwardProtocolV1Name); err == nil {
				t.Error("second use of the URL accepted")
			}
		})
	}
}

// forwardError opens the stream pair of one forwarded connection and
// returns what the server writes on its error stream. The header names are
// the protocol's (k8s.io/api/core/v1 has them as constants).
//
// The data stream is opened first (kubectl opens the error stream first):
// the server resets both streams as soon as the runtime fails, and a data
// stream reset before the server replied to it makes the client's
// CreateStream fail and, if the client then hangs up, leaves the library's
// goroutine waiting forever for a reply it cannot send (spdystream's
// waitWriteReply ignores the connection's end). Opened second, the error
// stream is replied to before the runtime runs.
func forwardError(t *testing.T, conn httpstream.Connection, port int32) string {
	t.Helper()
	h := http.Header{}
	h.Set("port", fmt.Sprint(port))
	h.Set("requestID", "0")
	h.Set("streamType", "data")
	data, err := conn.CreateStream(h)
	if err != nil {
		t.Fatal(err)
	}
	defer data.Reset()
	h.Set("streamType", "error")
	errStream, err := conn.CreateStream(h)
	if err != nil {
		t.Fatal(err)
	}
	errStream.Close() // the client never writes on it
	msg, err := io.ReadAll(errStream)
	if err != nil {
		t.Fatal(err)
	}
	return string(msg)
}

func TestForwardInNetNS(t *testing.T) {
	path, port := echoInNetNS(t)

	t.Run("missing netns", func(t *testing.T) {
		a, _ := net.Pipe()
		defer a.Close()
		err := ForwardInNetNS(context.Background(), path+".missing", port, a)
		if !errdefs.IsNotFound(err) {
			t.Errorf("err = %v, want not found", err)
		}
	})
	t.Run("bad port", func(t *testing.T) {
		a, _ := net.Pipe()
		defer a.Close()
		if err := ForwardInNetNS(context.Background(), path, 0, a); !errdefs.IsInvalidArgument(err) {
			t.Errorf("err = %v, want invalid argument", err)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		// A client that neither sends nor closes: only the context
		// ends the forward.
		ours, client := net.Pipe()
		defer client.Close()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- ForwardInNetNS(ctx, path, port, ours) }()
		line, err := bufio.NewReader(client).ReadString('\n')
		if err != nil || line != "hello\n" {
			t.Fatalf("greeting %q, %v", line, err)
		}
		cancel()
		if err := recv(t, done, "forward end"); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want canceled", err)
		}
	})
}
