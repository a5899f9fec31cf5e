package server

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

var errInjected = errors.New("injected failure")

// TestFailedSetupUndoesEverything: a RunPodSandbox or CreateContainer that
// fails at a step undoes every step before it, with a context of its own:
// here the request's context has ended when the step fails (a kubelet that
// gave up), and every cleanup call must still get a live context with a
// deadline. Nothing is left, and the name is free for a retry.
func TestFailedSetupUndoesEverything(t *testing.T) {
	tests := []struct {
		name, point string
		container   bool
		// keepCtx: the request's context stays live (a start's failure
		// is the loop's verdict, not its caller's end).
		keepCtx bool
	}{
		{name: "netns pin fails", point: "NewNetNS"},
		{name: "CNI ADD fails", point: "Setup"},
		{name: "CNI ADD fails after taking a lease", point: "Setup.after"},
		{name: "/dev/shm mount fails", point: "MountShm"},
		{name: "pod commit refused", point: "CommitObject"},
		{name: "pause start fails", point: "StartObject.run", keepCtx: true},
		{name: "image lookup fails", point: "Get", container: true},
		{name: "rootfs prepare fails", point: "PrepareRootfs", container: true},
		{name: "rootfs prepare fails after making it", point: "PrepareRootfs.after", container: true},
		{name: "container commit refused", point: "CommitObject", container: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			pod := ""
			if tc.container {
				pod = e.runPod("web")
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			failedAt := -1
			e.f.set(tc.point, func(string) error {
				failedAt = len(e.f.calls(""))
				if !tc.keepCtx {
					cancel()
				}
				return errInjected
			})
			var err error
			if tc.container {
				_, err = e.createCtr(ctx, pod, "app")
			} else {
				_, err = e.srv.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podConfig("web")})
			}
			if err == nil || failedAt < 0 {
				t.Fatalf("the request did not fail at %s: %v", tc.point, err)
			}
			e.f.set(tc.point, nil)
			checkCleanupContexts(t, e.f.calls("")[failedAt:])
			if !tc.container {
				e.checkNothingLeft()
				checkOnePod(t, e, e.runPod("web"))
				return
			}
			checkOnlyPod(t, e, pod)
			if _, err := e.createCtr(context.Background(), pod, "app"); err != nil {
				t.Fatalf("a retry of the create: %v", err)
			}
		})
	}
}

// checkCleanupContexts: every call made after the failure that takes a
// context got a live one with a deadline; at least one did (the name's
// release).
func checkCleanupContexts(t *testing.T, calls []callRec) {
	t.Helper()
	n := 0
	for _, c := range calls {
		if !c.hasCtx {
			continue
		}
		n++
		if c.ctxErr != nil || !c.deadline {
			t.Errorf("cleanup call %s(%.8s) ran with a context that ended (%v) or has no deadline (%v)", c.what, c.id, c.ctxErr, c.deadline)
		}
	}
	if n == 0 {
		t.Error("no cleanup call took a context")
	}
}

// checkOnlyPod: pod is the one object, and no container is left.
func checkOnlyPod(t *testing.T, e *env, pod string) {
	t.Helper()
	if o := e.loop.objectIDs(); len(o) != 1 || o[0] != pod {
		t.Errorf("objects %v, want only the pod %s", o, pod)
	}
	if _, ctrs := e.listed(); len(ctrs) != 0 {
		t.Errorf("containers listed: %v", ctrs)
	}
	if d, r := e.dirs("containers"), e.images.rootfsIDs(); len(d) != 0 || len(r) != 0 {
		t.Errorf("container dirs %v, rootfs %v left", d, r)
	}
}

// TestFailedCleanupKeepsThePod: when the cleanup itself fails (of a pod
// whose pause could not start, or a removal), the pod stays visible,
// NOTREADY, the loop keeps why, and a retried RemovePodSandbox finishes.
func TestFailedCleanupKeepsThePod(t *testing.T) {
	tests := []struct {
		name string
		// run makes the pod (the request may fail) and returns its id and
		// the removal's error.
		point     string
		startFail bool
		// why: the loop keeps the reason (a removal that began); a
		// cleanup that failed before (CNI DEL) left the pod as it was.
		why bool
	}{
		{name: "pause start fails, its CNI DEL fails", point: "Teardown", startFail: true},
		{name: "pause start fails, its /dev/shm unmount fails", point: "UnmountShm", startFail: true, why: true},
		{name: "removal's CNI DEL fails", point: "Teardown"},
		{name: "removal's /dev/shm unmount fails", point: "UnmountShm", why: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.f.set(tc.point, failOnce(errInjected))
			var pod string
			if tc.startFail {
				e.f.set("StartObject.run", failWith(errors.New("pause: exec format error")))
				_, err := e.srv.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: podConfig("web")})
				if err == nil {
					t.Fatal("RunPodSandbox succeeded")
				}
				pods, _ := e.listed()
				if len(pods) != 1 {
					t.Fatalf("pods listed %v after a cleanup that failed, want the pod", pods)
				}
				pod = pods[0]
			} else {
				pod = e.runPod("web")
				wantCode(t, e.removePod(pod), codes.Unknown, errInjected.Error())
			}
			if st := e.podState(pod); st != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
				t.Fatalf("pod %v, want NOTREADY", st)
			}
			if o, _ := e.loop.get(pod); tc.why != strings.Contains(o.CleanupError, errInjected.Error()) {
				t.Fatalf("the loop's cleanup error %q; want the failure's: %v", o.CleanupError, tc.why)
			}
			if err := e.removePod(pod); err != nil {
				t.Fatalf("a retried RemovePodSandbox: %v", err)
			}
			e.checkNothingLeft()
		})
	}
}

// TestFailedRemoveContainerSaysWhy: a RemoveContainer whose rootfs cannot
// be removed leaves the container visible, its status saying why, and a
// retry finishes.
func TestFailedRemoveContainerSaysWhy(t *testing.T) {
	e := newEnv(t)
	pod := e.runPod("web")
	id := e.runCtr(pod, "app")
	e.f.set("RemoveRootfs", failOnce(errInjected))
	remove := func() error {
		_, err := e.srv.RemoveContainer(context.Background(), &runtimeapi.RemoveContainerRequest{ContainerId: id})
		return err
	}
	wantCode(t, remove(), codes.Unknown, errInjected.Error())
	st := e.ctrStatus(id)
	if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || !strings.Contains(st.Message, "removal failed: "+errInjected.Error()) {
		t.Fatalf("container %v %q, want EXITED saying why its removal failed", st.State, st.Message)
	}
	if err := remove(); err != nil {
		t.Fatalf("a retried RemoveContainer: %v", err)
	}
	checkOnlyPod(t, e, pod)
}

// TestFailedUndoLeftForTheRestart: a RunPodSandbox whose CNI ADD failed
// and whose cleanup's CNI DEL fails too. The other cleanup steps still run
// (the name is free for kubelet's retry at once), but the pod's dir and
// record, which name its netns and lease, stay: the next start tears them
// down. Nothing is forgotten.
func TestFailedUndoLeftForTheRestart(t *testing.T) {
	e := newEnv(t)
	e.f.set("Setup.after", failOnce(errInjected))
	e.f.set("Teardown", failOnce(errInjected))
	if _, err := e.srv.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: podConfig("web")}); err == nil {
		t.Fatal("RunPodSandbox succeeded")
	}
	failed := e.dirs("sandboxes")
	if len(failed) != 1 {
		t.Fatalf("pod dirs %v after a cleanup that failed, want the pod's kept for the restart", failed)
	}
	retry := e.runPod("web")
	if pods, _ := e.listed(); len(pods) != 1 || pods[0] != retry {
		t.Fatalf("pods listed %v, want only the retry %s", pods, retry)
	}
	e.restart()
	checkOnePod(t, e, retry)
	if m := e.mounts.mounts(); len(m) != 2 {
		t.Fatalf("mounts %v, want only the retry's netns and /dev/shm", m)
	}
}
