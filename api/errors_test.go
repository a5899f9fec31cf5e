package api

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/internal/errmark"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
)

// Texts of docs/api.md 3.0 that clients compare byte for byte.
const (
	msgNotFound      = "containerd: container not found"
	msgUnknownStatus = "containerd: unknown container status " // trailing space is part of it
	msgStoredOnly    = "invalid parameter: StoredOnly cannot be specified without setting a valid Timestamp"
)

// nilStatusErr claims to carry a status but returns nil.
type nilStatusErr struct{}

func (nilStatusErr) Error() string              { return "odd" }
func (nilStatusErr) GRPCStatus() *status.Status { return nil }

// okStatusErr claims to carry an OK status.
type okStatusErr struct{}

func (okStatusErr) Error() string              { return "ok?" }
func (okStatusErr) GRPCStatus() *status.Status { return status.New(codes.OK, "") }

var toGRPCCases = []struct {
	name string
	err  error
	code codes.Code
	msg  string
}{
	{"bare NotFound", errdefs.ErrNotFound, codes.NotFound, "not found"},
	{"marked container not found", errmark.Mark(errors.New(msgNotFound), errdefs.ErrNotFound), codes.NotFound, msgNotFound},
	{"wrapped marked", fmt.Errorf("%w", errmark.Mark(errors.New(msgNotFound), errdefs.ErrNotFound)), codes.NotFound, msgNotFound},
	{"wrapped with context", fmt.Errorf("container %q: %w", "c1", errdefs.ErrNotFound), codes.NotFound, `container "c1": not found`},
	{"AlreadyExists", fmt.Errorf("exec %q: %w", "e1", errdefs.ErrAlreadyExists), codes.AlreadyExists, `exec "e1": already exists`},
	{"InvalidArgument", errmark.Mark(errors.New(msgStoredOnly), errdefs.ErrInvalidArgument), codes.InvalidArgument, msgStoredOnly},
	{"FailedPrecondition trailing space", errmark.Mark(errors.New(msgUnknownStatus), errdefs.ErrFailedPrecondition), codes.FailedPrecondition, msgUnknownStatus},
	{"Unavailable", fmt.Errorf("restoring: %w", errdefs.ErrUnavailable), codes.Unavailable, "restoring: unavailable"},
	{"DeadlineExceeded sentinel", errmark.Mark(errors.New("containerd: container did not start before the specified timeout"), context.DeadlineExceeded), codes.DeadlineExceeded, "containerd: container did not start before the specified timeout"},
	{"PermissionDenied", fmt.Errorf("x: %w", errdefs.ErrPermissionDenied), codes.PermissionDenied, "x: permission denied"},
	{"Internal", fmt.Errorf("get all pids for container: %w", errdefs.ErrInternal), codes.Internal, "get all pids for container: internal"},
	{"context.Canceled", context.Canceled, codes.Canceled, "context canceled"},
	{"wrapped context.Canceled", fmt.Errorf("wait pid file: %w", context.Canceled), codes.Canceled, "wait pid file: context canceled"},
	{"context.DeadlineExceeded", context.DeadlineExceeded, codes.DeadlineExceeded, "context deadline exceeded"},
	{"mkdir file exists", &fs.PathError{Op: "mkdir", Path: "/run/containerd/c1", Err: syscall.EEXIST}, codes.AlreadyExists, "mkdir /run/containerd/c1: file exists"},
	{"open no such file", &fs.PathError{Op: "open", Path: "/b/config.json", Err: syscall.ENOENT}, codes.NotFound, "open /b/config.json: no such file or directory"},
	{"permission", &fs.PathError{Op: "open", Path: "/x", Err: syscall.EACCES}, codes.PermissionDenied, "open /x: permission denied"},
	{"sentinel wins over fs", errmark.Mark(&fs.PathError{Op: "open", Path: "/x", Err: syscall.ENOENT}, errdefs.ErrInvalidArgument), codes.InvalidArgument, "open /x: no such file or directory"},
	{"unclassified", errors.New("no such process"), codes.Unknown, "no such process"},
	{"unclassified errno", syscall.ESRCH, codes.Unknown, "no such process"},
	{"unclassified wrapped", fmt.Errorf("oci runtime error: %w", errors.New(`exec: "nope": executable file not found in $PATH`)), codes.Unknown, `oci runtime error: exec: "nope": executable file not found in $PATH`},
	{"status error unchanged", status.Error(codes.NotFound, "no such containers"), codes.NotFound, "no such containers"},
	{"wrapped status keeps code, takes text", fmt.Errorf("list: %w", status.Error(codes.ResourceExhausted, "full")), codes.ResourceExhausted, "list: rpc error: code = ResourceExhausted desc = full"},
	{"nil status is not success", nilStatusErr{}, codes.Unknown, "odd"},
	{"ok status is not success", okStatusErr{}, codes.Unknown, "ok?"},
	{"wrapped ok status is not success", fmt.Errorf("x: %w", okStatusErr{}), codes.Unknown, "x: ok?"},
	//lint:ignore ST1005 the newline is part of what must pass through unchanged
	{"non-ASCII and percent", errors.New("bad id \"é%2F\"\n"), codes.Unknown, "bad id \"é%2F\"\n"},
}

func TestToGRPC(t *testing.T) {
	if ToGRPC(nil) != nil {
		t.Fatal("ToGRPC(nil) != nil")
	}
	if Code(nil) != codes.OK {
		t.Fatal("Code(nil) != OK")
	}
	for _, tc := range toGRPCCases {
		t.Run(tc.name, func(t *testing.T) {
			got := ToGRPC(tc.err)
			if got == nil {
				t.Fatal("ToGRPC returned nil for a non-nil error")
			}
			s, ok := status.FromError(got)
			if !ok {
				t.Fatalf("ToGRPC(%v) is not a status error: %T", tc.err, got)
			}
			if s.Code() != tc.code || s.Message() != tc.msg {
				t.Errorf("ToGRPC = (%v, %q), want (%v, %q)", s.Code(), s.Message(), tc.code, tc.msg)
			}
			if c := Code(tc.err); c != tc.code {
				t.Errorf("Code = %v, want %v", c, tc.code)
			}
		})
	}
}

func TestToGRPCOSErrors(t *testing.T) {
	// Real errors from the os package, as the runtime would pass them through.
	dir := t.TempDir()
	errExist := os.Mkdir(dir, 0o755)
	_, errNotExist := os.Open(dir + "/config.json")
	for _, tc := range []struct {
		err  error
		code codes.Code
	}{{errExist, codes.AlreadyExists}, {errNotExist, codes.NotFound}} {
		s := status.Convert(ToGRPC(tc.err))
		if s.Code() != tc.code || s.Message() != tc.err.Error() {
			t.Errorf("ToGRPC(%v) = (%v, %q), want (%v, same text)", tc.err, s.Code(), s.Message(), tc.code)
		}
	}
}

// errServer fails State with ToGRPC of the error named by the request id.
type errServer struct {
	types.UnimplementedAPIServer
}

func (errServer) State(_ context.Context, r *types.StateRequest) (*types.StateResponse, error) {
	for _, tc := range toGRPCCases {
		if tc.name == r.Id {
			return nil, ToGRPC(tc.err)
		}
	}
	return &types.StateResponse{}, nil
}

// TestToGRPCOverTheWire checks that code and text survive a real gRPC
// transport (grpc-message is percent-encoded on the wire).
func TestToGRPCOverTheWire(t *testing.T) {
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	types.RegisterAPIServer(srv, errServer{})
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := types.NewAPIClient(conn)

	for _, tc := range toGRPCCases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.State(context.Background(), &types.StateRequest{Id: tc.name})
			s := status.Convert(err)
			if s.Code() != tc.code || s.Message() != tc.msg {
				t.Errorf("client got (%v, %q), want (%v, %q)", s.Code(), s.Message(), tc.code, tc.msg)
			}
		})
	}
}

// A reply carries the message and the code only: no status details (which
// errdefs' pkg/errgrpc would add for a marked error, with code Unknown).
func TestToGRPCNoDetails(t *testing.T) {
	for _, tc := range toGRPCCases {
		if s := status.Convert(ToGRPC(tc.err)); len(s.Proto().GetDetails()) != 0 {
			t.Errorf("%s: reply has details %v", tc.name, s.Proto().GetDetails())
		}
	}
}
