// Package server is the gRPC edge of the daemon: it implements the containerd
// v0.2 API (types.APIServer) on top of the supervisor, next to the standard
// health service.
//
// Each handler validates its request (keeping the v0.2.9 error texts of
// docs/api.md 3.0), converts it to a supervisor request, and passes every
// error through api.ToGRPC, the one place where error classes become codes.
// Handlers never touch container state themselves.
package server

import (
	"context"
	"fmt"
	goruntime "runtime"
	"runtime/debug"

	"github.com/evjournal/containerd/api"
	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/supervisor"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// Server implements types.APIServer. Create it with New, then Register it on
// a grpc.Server before serving, and call SetServing once the supervisor has
// restored its state.
type Server struct {
	types.UnimplementedAPIServer

	sup     backend
	log     *logrus.Entry
	health  *health.Server
	machine *types.Machine // host facts, read once
	state   *stateGate     // State calls running at once (stategate.go)
}

// Option configures New.
type Option func(*Server)

// WithLogger sets the logger of the handlers (default: logrus' standard logger).
func WithLogger(l *logrus.Entry) Option {
	return func(s *Server) { s.log = l }
}

// New returns the API server for sup. Its health status is NOT_SERVING until
// SetServing(true).
func New(sup *supervisor.Supervisor, opts ...Option) *Server {
	return newServer(supervisorBackend{sup}, opts...)
}

func newServer(b backend, opts ...Option) *Server {
	s := &Server{
		sup:     b,
		log:     logrus.NewEntry(logrus.StandardLogger()),
		health:  health.NewServer(),
		machine: machineInfo(),
		state:   newStateGate(stateGateWidth()),
	}
	for _, o := range opts {
		o(s)
	}
	// The empty service name is the only one registered (docs/api.md 1.3):
	// any other name gets NotFound "unknown service".
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	return s
}

// Register adds the API and the health service to g. Call it before g.Serve.
func (s *Server) Register(g *grpc.Server) {
	types.RegisterAPIServer(g, s)
	healthpb.RegisterHealthServer(g, s.health)
}

// SetServing sets what the health service answers for service "": SERVING
// once restore is done, NOT_SERVING again while shutting down.
func (s *Server) SetServing(serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.health.SetServingStatus("", st)
}

// ServerOptions returns the grpc.Server options the API needs: interceptors
// that turn a handler panic into an Internal error (logged with its stack)
// instead of a daemon crash. Keepalive enforcement and message sizes stay at
// grpc's defaults, which v0.2 clients need (docs/api.md 1.1).
func ServerOptions(log *logrus.Entry) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(newServerCodec()), // events encoded once, directly (wireevent.go)
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
			defer recoverTo(log, info.FullMethod, &err)
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
			defer recoverTo(log, info.FullMethod, &err)
			return h(srv, ss)
		}),
	}
}

// recoverTo turns a panic of a handler into an Internal error in *err.
func recoverTo(log *logrus.Entry, method string, err *error) {
	if r := recover(); r != nil {
		log.WithField("method", method).Errorf("handler panic: %v\n%s", r, debug.Stack())
		*err = status.Error(codes.Internal, fmt.Sprintf("containerd: internal error in %s: %v", method, r))
	}
}

// GetServerVersion reports the API version (0.2.9) and the build's revision.
func (s *Server) GetServerVersion(context.Context, *types.GetServerVersionRequest) (*types.GetServerVersionResponse, error) {
	return &types.GetServerVersionResponse{
		Major:    api.VersionMajor,
		Minor:    api.VersionMinor,
		Patch:    api.VersionPatch,
		Revision: api.Revision,
	}, nil
}

// machineInfo returns the host's CPU count and RAM in MiB (docs/api.md 2.3:
// Machine.memory is total bytes / 1024 / 1024).
func machineInfo() *types.Machine {
	m := &types.Machine{Cpus: uint32(goruntime.NumCPU())}
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err == nil {
		m.Memory = uint64(si.Totalram) * uint64(si.Unit) / 1024 / 1024
	}
	return m
}
