package streaming

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	criserver "k8s.io/cri-streaming/pkg/streaming"
)

// DefaultAddr is a loopback address with a port the kernel picks: the URLs
// carry the real port, so nobody needs to know it in advance.
const DefaultAddr = "127.0.0.1:0"

// Config is the streaming server's configuration; zero values take defaults.
type Config struct {
	// Addr is the host:port to listen on, DefaultAddr when empty. The
	// server has no TLS nor authentication besides the one-time tokens:
	// anything but a loopback address exposes the containers.
	Addr string
	// StreamIdleTimeout closes a stream's connection after this long
	// without traffic (4h when zero, as in kubelet).
	StreamIdleTimeout time.Duration
	// StreamCreationTimeout bounds how long a client may take to open
	// its streams after the upgrade (30s when zero).
	StreamCreationTimeout time.Duration
	// Logger defaults to logrus.StandardLogger().
	Logger *logrus.Entry
}

// Server hands out one-time URLs for the CRI's Exec, Attach and
// PortForward calls and serves the streams behind them.
type Server struct {
	lib  criserver.Server // tokens, URLs and the stream protocols
	lis  *connListener
	http *http.Server
	log  *logrus.Entry

	// ctx is cancelled by Stop; every request and runtime call derives
	// from it.
	ctx      context.Context
	cancel   context.CancelFunc
	calls    group         // runtime calls in flight
	handlers group         // HTTP handlers in flight
	grace    time.Duration // stopGrace; shorter in tests

	mu      sync.Mutex
	started bool          // guarded by mu
	stopped bool          // guarded by mu
	served  chan struct{} // closed when the Serve goroutine returns
}

// New listens on cfg.Addr and returns a server whose URLs are valid at
// once; connections wait in the backlog until Start.
func New(cfg Config, rt Runtime) (*Server, error) {
	if rt == nil {
		return nil, fmt.Errorf("streaming server: no runtime: %w", errdefs.ErrInvalidArgument)
	}
	libCfg := libConfig(cfg)
	// The listener is opened here, not in the library's Start, so that the
	// URLs name the real port before the first GetExec (the library learns
	// the port in Start, racing with GetExec when the port is 0).
	l, err := net.Listen("tcp", libCfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("streaming server: listen on %s: %w", libCfg.Addr, err)
	}
	libCfg.BaseURL = &url.URL{Scheme: "http", Host: l.Addr().String(), Path: "/"}
	s := &Server{lis: newConnListener(l), log: cfg.Logger, grace: stopGrace, served: make(chan struct{})}
	if s.log == nil {
		s.log = logrus.NewEntry(logrus.StandardLogger())
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.lib, err = criserver.NewServer(libCfg, adapter{rt: rt, s: s})
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("streaming server: %w", err)
	}
	s.http = &http.Server{
		Handler:           http.HandlerFunc(s.serveHTTP),
		ReadHeaderTimeout: 30 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return s.ctx },
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
	}
	return s, nil
}

func libConfig(cfg Config) criserver.Config {
	c := criserver.DefaultConfig
	c.Addr = cfg.Addr
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if cfg.StreamIdleTimeout > 0 {
		c.StreamIdleTimeout = cfg.StreamIdleTimeout
	}
	if cfg.StreamCreationTimeout > 0 {
		c.StreamCreationTimeout = cfg.StreamCreationTimeout
	}
	return c
}

// Addr is the address the server listens on, with the real port.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// Start serves in the background. A server starts once, and not after Stop.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.started {
		return fmt.Errorf("streaming server: already started or stopped: %w", errdefs.ErrFailedPrecondition)
	}
	s.started = true
	go func() {
		defer close(s.served)
		if err := s.http.Serve(s.lis); !errors.Is(err, http.ErrServerClosed) {
			s.log.WithError(err).Error("cri streaming server stopped serving")
		}
	}()
	return nil
}

// stopGrace bounds each of Stop's two waits (for the runtime calls, then
// for the handlers: an exec writing its final status, a client still
// opening its streams) before it cuts every connection.
const stopGrace = 2 * time.Second

// Stop ends every stream, waits for the runtime calls behind them (which
// see their context cancelled) and for their handlers, and closes the
// listener. Stopping twice, or before Start, is fine.
func (s *Server) Stop() error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	started := s.started
	s.mu.Unlock()

	s.cancel()
	// The listener and the connections not hijacked; Close on the
	// listener is for a server never started.
	err := errors.Join(s.http.Close(), s.lis.Close())
	calls := s.calls.close()
	if !wait(calls, s.grace) {
		// A call blocked writing to a client that does not read does not
		// see its context: only the end of the connection unblocks it.
		s.lis.closeConns(true)
		<-calls
	}
	// Every runtime call has returned: the exec and attach handlers now
	// send the clients their final status and close their connections.
	// Port forwards and stream handshakes wait for the client: cut those.
	s.lis.closeConns(false)
	handlers := s.handlers.close()
	if !wait(handlers, s.grace) {
		s.lis.closeConns(true)
		<-handlers
	}
	if started {
		<-s.served
	}
	if err != nil {
		return fmt.Errorf("stop streaming server: %w", err)
	}
	return nil
}

// serveHTTP counts the handler in the work Stop waits for.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.handlers.enter() {
		http.Error(w, "streaming server is stopping", http.StatusServiceUnavailable)
		return
	}
	defer s.handlers.leave()
	s.lib.ServeHTTP(w, r)
}

// begin ties a runtime call to the server: its context ends with the
// call's own context or with Stop, and Stop waits for done.
func (s *Server) begin(parent context.Context) (context.Context, func(), error) {
	if !s.calls.enter() {
		return nil, nil, fmt.Errorf("streaming server is stopping: %w", errdefs.ErrUnavailable)
	}
	ctx, cancel := context.WithCancel(parent)
	stop := context.AfterFunc(s.ctx, cancel)
	return ctx, func() {
		stop()
		cancel()
		// Before leave: once Stop sees no call in flight, it must know
		// which connections their handlers are about to close.
		markClosing(parent)
		s.calls.leave()
	}, nil
}

// GetExec checks req and returns the one-time URL of its stream.
func (s *Server) GetExec(req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	if err := s.check(validateExec(req)); err != nil {
		return nil, err
	}
	// A copy: the library keeps the request until the URL is used, after
	// the gRPC call that passed it has returned.
	resp, err := s.lib.GetExec(proto.Clone(req).(*runtimeapi.ExecRequest))
	if err != nil {
		return nil, libError("exec", err)
	}
	return resp, nil
}

// GetAttach checks req and returns the one-time URL of its stream.
func (s *Server) GetAttach(req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	if err := s.check(validateAttach(req)); err != nil {
		return nil, err
	}
	resp, err := s.lib.GetAttach(proto.Clone(req).(*runtimeapi.AttachRequest))
	if err != nil {
		return nil, libError("attach", err)
	}
	return resp, nil
}

// GetPortForward checks req and returns the one-time URL of its stream.
// The ports the client forwards are named when it connects, not here.
func (s *Server) GetPortForward(req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	if err := s.check(validatePortForward(req)); err != nil {
		return nil, err
	}
	resp, err := s.lib.GetPortForward(proto.Clone(req).(*runtimeapi.PortForwardRequest))
	if err != nil {
		return nil, libError("port forward", err)
	}
	return resp, nil
}

// check adds to a request's validation that a stopped server hands out no
// URL nobody would answer.
func (s *Server) check(err error) error {
	if err != nil {
		return err
	}
	if s.ctx.Err() != nil {
		return fmt.Errorf("streaming server is stopped: %w", errdefs.ErrUnavailable)
	}
	return nil
}

// libError classifies the library's gRPC status errors (a full token
// cache is ResourceExhausted) as errdefs errors like the rest of the daemon.
func libError(what string, err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%s url: %w", what, err)
	}
	var class error = errdefs.ErrUnknown
	switch st.Code() {
	case codes.ResourceExhausted:
		class = errdefs.ErrResourceExhausted
	case codes.InvalidArgument:
		class = errdefs.ErrInvalidArgument
	}
	return fmt.Errorf("%s url: %s: %w", what, st.Message(), class)
}
