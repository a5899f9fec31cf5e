package main

import (
	"context"
	"fmt"
	"net"
	"path"
	"path/filepath"
	goruntime "runtime"
	"text/template"

	"github.com/evjournal/containerd/cri/imagesvc"
	criserver "github.com/evjournal/containerd/cri/server"
	"github.com/evjournal/containerd/image"
	"github.com/evjournal/containerd/podnet"
	"github.com/evjournal/containerd/supervisor"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// criEndpoint is the optional Kubernetes CRI service (--cri-listen): its own
// socket and gRPC server, over the same supervisor as the 0.2 API.
type criEndpoint struct {
	srv  *criserver.Server
	grpc *grpc.Server
	lis  net.Listener
	log  *logrus.Entry
}

// newCRI opens the image store and the CNI network and listens; nil when
// --cri-listen is not set.
func newCRI(cfg config, sup *supervisor.Supervisor, log *logrus.Entry) (*criEndpoint, error) {
	cc := cfg.cri
	if cc.listen == "" {
		return nil, nil
	}
	log = log.WithField("module", "cri")
	images, err := image.Open(filepath.Join(cc.root, "images"), image.Options{Mirrors: cc.mirrors, Insecure: cc.insecure, HostsDir: cc.registryHosts,
		Logger: log, Limits: cc.limits})
	if err != nil {
		return nil, fmt.Errorf("cri: image store: %w", err)
	}
	network, err := podnet.NewNetwork(podnet.Config{PluginDirs: cc.cniBinDirs, ConfDir: cc.cniConfDir, CacheDir: filepath.Join(cc.root, "cni"), Logger: log})
	if err != nil {
		return nil, fmt.Errorf("cri: network: %w", err)
	}
	if err := network.Status(); err != nil {
		log.WithError(err).Warn("cri: the pod network is not ready (NetworkReady false) until a CNI config appears")
	}
	handlers, err := resolveRuntimeHandlers(cc.handlers, executableDir())
	if err != nil {
		return nil, err
	}
	var cniTemplate *template.Template
	if cc.cniConfTemplate != "" {
		if cniTemplate, err = criserver.ParseCNIConfTemplate(cc.cniConfTemplate); err != nil {
			return nil, fmt.Errorf("--cni-conf-template: %w", err)
		}
	}
	srv, err := criserver.New(criserver.Config{
		Root: filepath.Join(cc.root, "cri"), DataRoot: cc.root, StateDir: filepath.Join(cfg.stateDir, ".cri"), Pause: cc.pauseBinary(),
		SandboxImage: cc.sandboxImage, Network: network, Images: images, ExecOutputBudget: cc.execSyncBudget, Logger: log, CDI: newCDI(cc.cdiSpecDirs),
		Runtime: cfg.runtime, RuntimeArgs: cfg.runtimeArgs, RuntimeHandlers: handlers,
		CNIConfTemplate: cniTemplate, CNIConfDir: cc.cniConfDir,
	}, sup)
	if err != nil {
		return nil, err
	}
	lis, err := listenUnix(cc.listen, cfg.socketGID)
	if err != nil {
		return nil, fmt.Errorf("cri: listen %s: %w", cc.listen, err)
	}
	g := grpc.NewServer(grpc.ChainUnaryInterceptor(logFailedCRI(log)), grpc.ChainStreamInterceptor(logFailedCRIStream(log)),
		grpc.NumStreamWorkers(criStreamWorkers()))
	srv.Register(g)
	var pinned []string
	if cc.sandboxImage != "" {
		pinned = append(pinned, cc.sandboxImage)
	}
	runtimeapi.RegisterImageServiceServer(g, imagesvc.New(images, pinned...))
	return &criEndpoint{srv: srv, grpc: g, lis: lis, log: log}, nil
}

// criStreamWorkers is how many goroutines serve CRI calls, kept between
// calls. Without them gRPC starts a goroutine per call, whose stack then
// grows (copied, twice or more) down the handler's calls: kubelet's
// probes, status and stats calls are many and small, and that start is
// a good part of their cost (a Version call took 0.16 ms without workers,
// 0.08 with them, here). A call that finds them all busy gets a goroutine
// of its own as before, so a long stream (events, exec, attach) never
// holds up others.
func criStreamWorkers() uint32 {
	return uint32(max(4, goruntime.NumCPU()))
}

// logFailedCRI logs every CRI call the daemon answers with an error: at
// debug level what kubelet asks routinely of things that are gone
// (NotFound), at info level the rest, with the method and the code, so a
// refused pod or container is explained in the daemon's log.
func logFailedCRI(log *logrus.Entry) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		logCRIError(log, info.FullMethod, err)
		return resp, err
	}
}

func logFailedCRIStream(log *logrus.Entry) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		err := handler(srv, ss)
		if ss.Context().Err() == nil {
			logCRIError(log, info.FullMethod, err)
		}
		return err
	}
}

func logCRIError(log *logrus.Entry, method string, err error) {
	if err == nil {
		return
	}
	code := status.Code(err)
	l := log.WithFields(logrus.Fields{"method": path.Base(method), "code": code.String()}).WithError(err)
	if code == codes.NotFound {
		l.Debug("CRI call failed")
		return
	}
	l.Info("CRI call failed")
}

// start follows the supervisor's events (after its restore) and serves.
func (e *criEndpoint) start(ctx context.Context) (<-chan error, error) {
	if err := e.srv.Start(ctx); err != nil {
		return nil, err
	}
	errc := make(chan error, 1)
	go func() {
		if err := e.grpc.Serve(e.lis); err != nil {
			errc <- fmt.Errorf("cri: %w", err)
		}
	}()
	e.log.WithField("socket", e.lis.Addr().String()).Info("CRI service serving")
	return errc, nil
}

func (e *criEndpoint) stop() {
	e.grpc.Stop()
	e.srv.Close()
}
