package main

import (
	"context"
	"fmt"
	"net"
	"path/filepath"

	"github.com/evjournal/containerd/cri/imagesvc"
	criserver "github.com/evjournal/containerd/cri/server"
	"github.com/evjournal/containerd/image"
	"github.com/evjournal/containerd/podnet"
	"github.com/evjournal/containerd/supervisor"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
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
	images, err := image.Open(filepath.Join(cc.root, "images"), image.Options{Mirrors: cc.mirrors, Insecure: cc.insecure, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("cri: image store: %w", err)
	}
	network, err := podnet.NewNetwork(podnet.Config{PluginDirs: cc.cniBinDirs, ConfDir: cc.cniConfDir, CacheDir: filepath.Join(cc.root, "cni")})
	if err != nil {
		return nil, fmt.Errorf("cri: network: %w", err)
	}
	if err := network.Status(); err != nil {
		log.WithError(err).Warn("cri: the pod network is not ready (NetworkReady false) until a CNI config appears")
	}
	srv, err := criserver.New(criserver.Config{
		Root: filepath.Join(cc.root, "cri"), StateDir: filepath.Join(cfg.stateDir, ".cri"), Pause: cc.pauseBinary(),
		Network: network, Images: images, Logger: log,
	}, sup)
	if err != nil {
		return nil, err
	}
	lis, err := listenUnix(cc.listen, cfg.socketGID)
	if err != nil {
		return nil, fmt.Errorf("cri: listen %s: %w", cc.listen, err)
	}
	g := grpc.NewServer()
	srv.Register(g)
	runtimeapi.RegisterImageServiceServer(g, imagesvc.New(images))
	return &criEndpoint{srv: srv, grpc: g, lis: lis, log: log}, nil
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
