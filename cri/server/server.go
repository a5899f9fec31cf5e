// Package server is the daemon's Kubernetes CRI v1 RuntimeService: pods and
// their containers as containers of the one supervisor loop (journaled like
// any other, visible to ctr), their network namespaces through CNI
// (package podnet), their rootfs from the image store (package image), and
// their OCI specs from package cri/ocispec. The ImageService is
// cri/imagesvc. See docs/cri.md.
package server

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"text/template"

	"github.com/evjournal/containerd/api"
	"github.com/evjournal/containerd/cri/streaming"
	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/supervisor"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RuntimeName is what Version reports.
const RuntimeName = "evjournal-containerd"

// Config is what the daemon gives the CRI service.
type Config struct {
	// Root is the CRI service's persistent dir (records of pods and
	// containers, their bundles): <--root>/cri.
	Root string
	// DataRoot is the daemon's --root, which holds Root and the image
	// store: set to 0711 at start, so that the root of a pod's user
	// namespace can reach its rootfs (see reachableFromUserNS). Empty
	// means Root.
	DataRoot string
	// StateDir is for what does not survive a reboot (pinned network
	// namespaces, pod /dev/shm mounts): <--state-dir>/.cri.
	StateDir string
	// Pause is the host path of the pause binary the sandboxes run.
	Pause string
	// SandboxImage, when set, replaces Pause: the sandboxes run this
	// image's entrypoint and cmd on a rootfs of their own (pulled at the
	// first RunPodSandbox that needs it).
	SandboxImage string
	// CDI resolves the CDI devices a container asks for and edits its
	// spec (see cdi.go); nil refuses a container that asks for one.
	CDI CDIDevices
	// Network is the CNI network pods join (nil: host network only; an
	// unset field, not a nil *podnet.Network).
	Network PodNetwork
	Images  ImageStore
	// StreamAddr is the streaming server's address (Exec, PortForward):
	// loopback, a free port by default.
	StreamAddr string
	// ExecOutputBudget bounds the ExecSync output the service holds at
	// once, all calls together (0: DefaultExecOutputBudget).
	ExecOutputBudget int64
	// Runtime and RuntimeArgs are the default runtime handler's (""): the
	// daemon's --runtime and --runtime-args, which the supervisor runs
	// when a request names no runtime; here for its features.
	Runtime     string
	RuntimeArgs []string
	// RuntimeHandlers are the other handlers pods may name
	// (--cri-runtime-handler), see handlers.go.
	RuntimeHandlers []RuntimeHandler
	// CNIConfTemplate, when set, makes the pods' CNI config in CNIConfDir
	// once kubelet sends the pod CIDR (UpdateRuntimeConfig).
	CNIConfTemplate *template.Template
	CNIConfDir      string
	Logger          *logrus.Entry
}

// Server implements runtimeapi.RuntimeServiceServer. Methods not provided
// yet answer Unimplemented (embedded).
type Server struct {
	runtimeapi.UnimplementedRuntimeServiceServer

	cfg Config
	// stats is what the stats calls keep between calls (statsread.go).
	stats *statsState
	// sup is the supervisor's loop: the objects' lifecycle and processes.
	sup Loop
	// events are the journal's, for GetContainerEvents.
	events EventSource
	// host makes and removes a pod's netns pin and /dev/shm.
	host podMounts
	log  *logrus.Entry
	recs *records

	stream *streaming.Server
	// execBudget bounds the ExecSync output held at once.
	execBudget *outputBudget
	// handlers are the runtime handlers pods may name.
	handlers *handlerSet
}

// New prepares the service; Start loads the records and reconciles them
// with the loop's objects.
func New(cfg Config, sup *supervisor.Supervisor) (*Server, error) {
	if sup == nil {
		return nil, fmt.Errorf("cri: the supervisor is required")
	}
	return newServer(cfg, sup, journalEvents{sup}, hostMounts{})
}

// newServer is New with its seams given (the unit tests' fakes).
func newServer(cfg Config, sup Loop, events EventSource, host podMounts) (*Server, error) {
	if cfg.Root == "" || cfg.StateDir == "" || cfg.Images == nil {
		return nil, fmt.Errorf("cri: Root, StateDir and Images are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = logrus.WithField("module", "cri")
	}
	for _, d := range []string{cfg.Root, cfg.StateDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("cri: %w", err)
		}
	}
	handlers, err := newHandlerSet(RuntimeHandler{Runtime: cmp.Or(cfg.Runtime, runtime.DefaultRuntime), Args: cfg.RuntimeArgs}, cfg.RuntimeHandlers, cfg.Logger)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, sup: sup, events: events, host: host, log: cfg.Logger, recs: newRecords(),
		execBudget: newOutputBudget(cfg.ExecOutputBudget), handlers: handlers}
	if err := s.openLayout(); err != nil {
		return nil, err
	}
	st, err := streaming.New(streaming.Config{Addr: cfg.StreamAddr, Logger: cfg.Logger}, streamRuntime{s})
	if err != nil {
		return nil, fmt.Errorf("cri: streaming server: %w", err)
	}
	s.stream = st
	s.stats = newStatsState(cfg.Images)
	return s, nil
}

// Register adds the RuntimeService to g.
func (s *Server) Register(g *grpc.Server) { runtimeapi.RegisterRuntimeServiceServer(g, s) }

// Start loads the records and reconciles them with the loop's objects (see
// reconcile.go). Call after the supervisor's restore: the exits that
// happened while the daemon was down are in the objects already.
func (s *Server) Start(ctx context.Context) error {
	if err := s.load(ctx); err != nil {
		return err
	}
	return s.stream.Start()
}

// Close stops the streaming server.
func (s *Server) Close() { s.stream.Stop() }

func (s *Server) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{
		Version: "0.1.0", RuntimeName: RuntimeName, RuntimeVersion: api.Version(), RuntimeApiVersion: "v1",
	}, nil
}

// Status reports the runtime ready (the supervisor answers) and the network
// ready only when a CNI config is loaded, with the reason otherwise.
func (s *Server) Status(ctx context.Context, r *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	runtimeReady := &runtimeapi.RuntimeCondition{Type: runtimeapi.RuntimeReady, Status: true}
	if _, err := s.sup.State(ctx, ""); err != nil {
		runtimeReady.Status, runtimeReady.Reason, runtimeReady.Message = false, "SupervisorNotReady", err.Error()
	}
	netReady := &runtimeapi.RuntimeCondition{Type: runtimeapi.NetworkReady, Status: true}
	var err error
	if s.cfg.Network == nil {
		err = fmt.Errorf("no CNI network configured")
	} else {
		err = s.cfg.Network.Status()
	}
	if err != nil {
		netReady.Status, netReady.Reason, netReady.Message = false, "NetworkPluginNotReady", err.Error()
	}
	return &runtimeapi.StatusResponse{
		Status:          &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{runtimeReady, netReady}},
		RuntimeHandlers: s.handlers.status(),
		Features:        &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: true},
	}, nil
}

// RuntimeConfig tells kubelet (and critest) the cgroup driver: cgroupfs,
// the one runc is driven with here (a systemd *.slice parent is refused).
func (s *Server) RuntimeConfig(context.Context, *runtimeapi.RuntimeConfigRequest) (*runtimeapi.RuntimeConfigResponse, error) {
	return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_CGROUPFS}}, nil
}

// newID is a CRI object id: 64 hex digits, as kubelet is used to.
func newID() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}

func (s *Server) dataRoot() string {
	if s.cfg.DataRoot != "" {
		return s.cfg.DataRoot
	}
	return s.cfg.Root
}

func (s *Server) sandboxDir(id string) string   { return filepath.Join(s.cfg.Root, "sandboxes", id) }
func (s *Server) containerDir(id string) string { return filepath.Join(s.cfg.Root, "containers", id) }
