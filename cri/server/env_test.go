package server

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/evjournal/containerd/cri/ocispec"
	"github.com/evjournal/containerd/image"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// env is the service on fakes (fakes_test.go, fakeloop_test.go,
// fakejournal_test.go) over a temp dir: no root, no runc, no CNI.
type env struct {
	t      *testing.T
	cfg    Config
	f      *faults
	j      *fakeJournal
	loop   *fakeLoop
	images *fakeImages
	net    *fakeNetwork
	mounts *fakeMounts
	srv    *Server
}

const testImage = "docker.io/library/busybox:1.36"

var testImageID = "sha256:" + strings.Repeat("b", 64)

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{t: t, f: newFaults(), j: newFakeJournal()}
	e.loop = newFakeLoop(e.f, e.j)
	e.images = newFakeImages(e.f, filepath.Join(dir, "images"))
	e.images.add(testImage, image.Image{ID: testImageID, RepoDigests: []string{"docker.io/library/busybox@sha256:" + strings.Repeat("d", 64)},
		Config: ocispec.ImageConfig{Cmd: []string{"sleep", "inf"}}})
	e.net, e.mounts = newFakeNetwork(e.f), newFakeMounts(e.f)
	pause := filepath.Join(dir, "pause")
	if err := os.WriteFile(pause, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.Out = io.Discard
	e.cfg = Config{Root: filepath.Join(dir, "root", "cri"), DataRoot: filepath.Join(dir, "root"), StateDir: filepath.Join(dir, "state", ".cri"),
		Pause: pause, Network: e.net, Images: e.images, StreamAddr: "127.0.0.1:0", Logger: logrus.NewEntry(log)}
	e.start()
	t.Cleanup(func() {
		e.srv.Close()
		e.loop.work.Wait()
	})
	return e
}

// start makes a service over the fakes and the dirs, and starts it (its
// reconcile).
func (e *env) start() {
	e.t.Helper()
	srv, err := newServer(e.cfg, e.loop, e.j, e.mounts)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.srv = srv
}

// restart is the daemon started again after a crash: a new service over
// the same dirs, and the loop as its restore leaves it.
func (e *env) restart() {
	e.t.Helper()
	e.srv.Close()
	e.loop.restart()
	e.start()
}

func podConfig(name string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: "uid-" + name},
		Labels:       map[string]string{"app": name},
		LogDirectory: "/var/log/pods/" + name,
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Ipc: runtimeapi.NamespaceMode_POD}}},
	}
}

func ctrConfig(name string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image: &runtimeapi.ImageSpec{Image: testImage}, Labels: map[string]string{"ctr": name}}
}

// runPod runs a pod of podConfig(name).
func (e *env) runPod(name string) string {
	e.t.Helper()
	r, err := e.srv.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: podConfig(name)})
	if err != nil {
		e.t.Fatalf("RunPodSandbox %s: %v", name, err)
	}
	return r.PodSandboxId
}

func (e *env) createCtr(ctx context.Context, pod, name string) (string, error) {
	r, err := e.srv.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: ctrConfig(name)})
	return r.GetContainerId(), err
}

// runCtr creates and starts a container.
func (e *env) runCtr(pod, name string) string {
	e.t.Helper()
	id, err := e.createCtr(context.Background(), pod, name)
	if err != nil {
		e.t.Fatalf("CreateContainer %s: %v", name, err)
	}
	if _, err := e.srv.StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		e.t.Fatalf("StartContainer %s: %v", name, err)
	}
	return id
}

func (e *env) ctrStatus(id string) *runtimeapi.ContainerStatus {
	e.t.Helper()
	r, err := e.srv.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		e.t.Fatalf("ContainerStatus %s: %v", id, err)
	}
	return r.Status
}

func (e *env) podState(id string) runtimeapi.PodSandboxState {
	e.t.Helper()
	r, err := e.srv.PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if err != nil {
		e.t.Fatalf("PodSandboxStatus %s: %v", id, err)
	}
	return r.Status.State
}

func (e *env) stopPod(id string) {
	e.t.Helper()
	if _, err := e.srv.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
		e.t.Fatalf("StopPodSandbox %s: %v", id, err)
	}
}

func (e *env) stopCtr(id string) {
	e.t.Helper()
	if _, err := e.srv.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: id}); err != nil {
		e.t.Fatalf("StopContainer %s: %v", id, err)
	}
}

func (e *env) removePod(id string) error {
	_, err := e.srv.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
	return err
}

// listed are the ids ListPodSandbox and ListContainers show, sorted.
func (e *env) listed() (pods, ctrs []string) {
	e.t.Helper()
	ps, err := e.srv.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, p := range ps.Items {
		pods = append(pods, p.Id)
	}
	cs, err := e.srv.ListContainers(context.Background(), &runtimeapi.ListContainersRequest{})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, c := range cs.Containers {
		ctrs = append(ctrs, c.Id)
	}
	slices.Sort(pods)
	slices.Sort(ctrs)
	return pods, ctrs
}

// dirs are the ids with a dir under the CRI root's sandboxes or containers.
func (e *env) dirs(kind string) []string {
	e.t.Helper()
	entries, err := os.ReadDir(filepath.Join(e.cfg.Root, kind))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		e.t.Fatal(err)
	}
	var out []string
	for _, d := range entries {
		out = append(out, d.Name())
	}
	return out
}

// checkNothingLeft: no object, record, dir, rootfs, lease, mount or
// process is left.
func (e *env) checkNothingLeft() {
	e.t.Helper()
	e.loop.work.Wait()
	pods, ctrs := e.listed()
	left := map[string][]string{
		"pods listed": pods, "containers listed": ctrs, "objects": e.loop.objectIDs(),
		"pod dirs": e.dirs("sandboxes"), "container dirs": e.dirs("containers"), "retired dirs": e.dirs("removing"),
		"rootfs": e.images.rootfsIDs(),
		"leases": e.net.leaseIDs(), "mounts": e.mounts.mounts(), "processes": e.loop.runningIDs(),
	}
	for what, l := range left {
		if len(l) > 0 {
			e.t.Errorf("%s left: %v", what, l)
		}
	}
}

func codeOf(err error) codes.Code { return status.Code(err) }

// wantCode fails unless err has code want (and, when given, says each of
// the words).
func wantCode(t *testing.T, err error, want codes.Code, words ...string) {
	t.Helper()
	if codeOf(err) != want {
		t.Fatalf("error %v: code %v, want %v", err, codeOf(err), want)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %v does not say %q", err, w)
		}
	}
}
