package server

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/supervisor"
	"github.com/evjournal/containerd/supervisor/journal"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
)

// fakeBackend records the requests it gets and answers with the func fields;
// a nil func answers "container not found".
type fakeBackend struct {
	create     func(supervisor.CreateRequest) (supervisor.ContainerInfo, error)
	exec       func(supervisor.ExecRequest) (int, error)
	signal     func(id, pid string, sig syscall.Signal) error
	update     func(supervisor.UpdateRequest) error
	updateProc func(supervisor.ProcessUpdate) error
	state      func(id string) ([]supervisor.ContainerInfo, error)
	stats      func(id string) (*runtime.Stats, error)
	createCP   func(id, dir string, o runtime.CheckpointOpts) error
	deleteCP   func(id, dir, name string) error
	listCP     func(id, dir string) ([]runtime.Checkpoint, error)
	subscribe  func(supervisor.SubscribeRequest) (subscription, error)
}

var errFakeNotFound = supervisor.ErrContainerNotFound

func (f *fakeBackend) CreateContainer(_ context.Context, r supervisor.CreateRequest) (supervisor.ContainerInfo, error) {
	if f.create == nil {
		return supervisor.ContainerInfo{}, errFakeNotFound
	}
	return f.create(r)
}

func (f *fakeBackend) Exec(_ context.Context, r supervisor.ExecRequest) (int, error) {
	if f.exec == nil {
		return 0, errFakeNotFound
	}
	return f.exec(r)
}

func (f *fakeBackend) Signal(_ context.Context, id, pid string, sig syscall.Signal) error {
	if f.signal == nil {
		return errFakeNotFound
	}
	return f.signal(id, pid, sig)
}

func (f *fakeBackend) Update(_ context.Context, r supervisor.UpdateRequest) error {
	if f.update == nil {
		return errFakeNotFound
	}
	return f.update(r)
}

func (f *fakeBackend) UpdateProcess(_ context.Context, r supervisor.ProcessUpdate) error {
	if f.updateProc == nil {
		return errFakeNotFound
	}
	return f.updateProc(r)
}

func (f *fakeBackend) State(_ context.Context, id string) ([]supervisor.ContainerInfo, error) {
	if f.state == nil {
		return nil, errFakeNotFound
	}
	return f.state(id)
}

func (f *fakeBackend) Stats(_ context.Context, id string) (*runtime.Stats, error) {
	if f.stats == nil {
		return nil, errFakeNotFound
	}
	return f.stats(id)
}

func (f *fakeBackend) CreateCheckpoint(_ context.Context, id, dir string, o runtime.CheckpointOpts) error {
	if f.createCP == nil {
		return errFakeNotFound
	}
	return f.createCP(id, dir, o)
}

func (f *fakeBackend) DeleteCheckpoint(_ context.Context, id, dir, name string) error {
	if f.deleteCP == nil {
		return errFakeNotFound
	}
	return f.deleteCP(id, dir, name)
}

func (f *fakeBackend) ListCheckpoints(_ context.Context, id, dir string) ([]runtime.Checkpoint, error) {
	if f.listCP == nil {
		return nil, errFakeNotFound
	}
	return f.listCP(id, dir)
}

func (f *fakeBackend) JournalID() string { return "0123456789abcdef0123456789abcdef" }

func (f *fakeBackend) Subscribe(_ context.Context, r supervisor.SubscribeRequest) (subscription, error) {
	if f.subscribe == nil {
		return nil, errors.New("no subscriptions in this test")
	}
	return f.subscribe(r)
}

// fakeSub replays events, then ends with end (nil: waits for the context,
// like a live subscription with no new events).
type fakeSub struct {
	events []journal.Event
	end    error

	mu     sync.Mutex
	closed chan struct{}
}

func newFakeSub(end error, evs ...journal.Event) *fakeSub {
	return &fakeSub{events: evs, end: end, closed: make(chan struct{})}
}

func (s *fakeSub) Next(ctx context.Context) (journal.Event, error) {
	s.mu.Lock()
	if len(s.events) > 0 {
		ev := s.events[0]
		s.events = s.events[1:]
		s.mu.Unlock()
		return ev, nil
	}
	s.mu.Unlock()
	if s.end != nil {
		return journal.Event{}, s.end
	}
	select {
	case <-ctx.Done():
		return journal.Event{}, ctx.Err()
	case <-s.closed:
		return journal.Event{}, io.EOF
	}
}

func (s *fakeSub) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.closed:
	default:
		close(s.closed)
	}
}

// startServer serves a Server over an in-memory connection and returns it
// with a client; both are stopped when the test ends.
func startServer(t testing.TB, b backend) (*Server, types.APIClient, *grpc.ClientConn) {
	t.Helper()
	log := logrus.New()
	log.SetOutput(io.Discard)
	entry := logrus.NewEntry(log)
	s := newServer(b, WithLogger(entry))
	g := grpc.NewServer(ServerOptions(entry)...)
	s.Register(g)
	lis := bufconn.Listen(1 << 20)
	go func() { _ = g.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		g.Stop()
	})
	return s, types.NewAPIClient(conn), conn
}
