package imagesvc_test

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evjournal/containerd/cri/imagesvc"
	"github.com/evjournal/containerd/image"
	"github.com/evjournal/containerd/integration/fixture"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestMain(m *testing.M) { fixture.Main(m) }

// callLimit bounds each CRI call of these tests (pulls are from an
// in-process registry).
const callLimit = 30 * time.Second

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), callLimit)
	t.Cleanup(cancel)
	return c
}

// env is a store in a temp dir served by the ImageService on a unix socket,
// and a CRI client connected to it as kubelet and critest are.
type env struct {
	client runtimeapi.ImageServiceClient
	store  *image.Store
	root   string
}

// newEnv starts the service. Its cleanup stops the server, removes every
// rootfs the test left and fails the test if a mount under the root remains.
func newEnv(t *testing.T, opts image.Options) *env {
	t.Helper()
	fixture.RequireRoot(t)
	e := &env{root: t.TempDir()}
	if opts.Logger == nil {
		quiet := logrus.New()
		quiet.SetOutput(io.Discard)
		opts.Logger = logrus.NewEntry(quiet)
	}
	var err error
	if e.store, err = image.Open(e.root, opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.cleanStore(t) })
	e.client = serve(t, imagesvc.New(e.store))
	return e
}

// serve serves svc on a socket in a short temp dir (a socket path must fit
// in 108 bytes, which t.TempDir's may not) and connects a client to it.
func serve(t *testing.T, svc runtimeapi.ImageServiceServer) runtimeapi.ImageServiceClient {
	t.Helper()
	dir, err := os.MkdirTemp("", "cri-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	lis, err := net.Listen("unix", filepath.Join(dir, "cri.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	runtimeapi.RegisterImageServiceServer(srv, svc)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	conn, err := grpc.NewClient("unix://"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return runtimeapi.NewImageServiceClient(conn)
}

func (e *env) cleanStore(t *testing.T) {
	for _, r := range e.store.ListRootfs() {
		if err := e.store.RemoveRootfs(r.ContainerID); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}
	if m := fixture.MountsUnder(t, e.root); len(m) > 0 {
		t.Errorf("mounts left under %s: %v", e.root, m)
	}
}

// pull pulls ref without credentials and returns the image_ref.
func (e *env) pull(t *testing.T, ref string) string {
	t.Helper()
	resp, err := e.client.PullImage(ctx(t), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatalf("PullImage %s: %v", ref, err)
	}
	return resp.ImageRef
}

// status returns ImageStatus's image for ref (nil when absent).
func (e *env) status(t *testing.T, ref string) *runtimeapi.Image {
	t.Helper()
	resp, err := e.client.ImageStatus(ctx(t), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatalf("ImageStatus %s: %v", ref, err)
	}
	return resp.Image
}

func (e *env) list(t *testing.T, filter *runtimeapi.ImageFilter) []*runtimeapi.Image {
	t.Helper()
	resp, err := e.client.ListImages(ctx(t), &runtimeapi.ListImagesRequest{Filter: filter})
	if err != nil {
		t.Fatalf("ListImages %v: %v", filter, err)
	}
	return resp.Images
}

// wantCode fails the test unless err is a status of code c whose message
// holds each of the parts.
func wantCode(t *testing.T, what string, err error, c codes.Code, parts ...string) {
	t.Helper()
	st, _ := status.FromError(err)
	if err == nil || st.Code() != c {
		t.Errorf("%s: %v, want code %s", what, err, c)
		return
	}
	for _, p := range parts {
		if !strings.Contains(st.Message(), p) {
			t.Errorf("%s: %q, want it to name %q", what, st.Message(), p)
		}
	}
}
