package server

import (
	"context"
	"slices"
	"syscall"
	"testing"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestStopContainerAsksTheLoop: what StopContainer does depends on what the
// loop says of the container, whatever its record says: a process is
// signalled only when it runs, a stop returns once its exit is in the loop,
// and one being started is refused.
func TestStopContainerAsksTheLoop(t *testing.T) {
	tests := []struct {
		name string
		// prepare makes the container (in pod) what the case needs.
		prepare  func(e *env, pod string) string
		timeout  int64
		wantCode codes.Code
		wantSigs []syscall.Signal
		want     runtimeapi.ContainerState
		wantExit int32
	}{
		{name: "running: SIGTERM", prepare: running, timeout: 10,
			wantSigs: []syscall.Signal{syscall.SIGTERM}, want: runtimeapi.ContainerState_CONTAINER_EXITED, wantExit: 143},
		{name: "running, no grace: SIGKILL", prepare: running,
			wantSigs: []syscall.Signal{syscall.SIGKILL}, want: runtimeapi.ContainerState_CONTAINER_EXITED, wantExit: 137},
		{name: "running, lives through SIGTERM: SIGKILL after the grace", timeout: 1,
			prepare: func(e *env, pod string) string {
				id := running(e, pod)
				e.loop.mu.Lock()
				e.loop.ignoreTERM[id] = true
				e.loop.mu.Unlock()
				return id
			},
			wantSigs: []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}, want: runtimeapi.ContainerState_CONTAINER_EXITED, wantExit: 137},
		{name: "running, its record from an older daemon says exited",
			prepare: func(e *env, pod string) string {
				id := running(e, pod)
				c, _ := e.srv.recs.container(id)
				old := *c
				old.rec.State, old.rec.ExitCode = legacyExited, 1
				e.srv.recs.addContainer(&old)
				return id
			},
			wantSigs: []syscall.Signal{syscall.SIGKILL}, want: runtimeapi.ContainerState_CONTAINER_EXITED, wantExit: 137},
		{name: "exited by itself: no signal",
			prepare: func(e *env, pod string) string {
				id := running(e, pod)
				e.loop.exitProcess(id, "init", 3)
				return id
			},
			want: runtimeapi.ContainerState_CONTAINER_EXITED, wantExit: 3},
		{name: "created: no signal", prepare: created, timeout: 10, want: runtimeapi.ContainerState_CONTAINER_CREATED},
		{name: "being started: refused", wantCode: codes.FailedPrecondition, want: runtimeapi.ContainerState_CONTAINER_CREATED,
			prepare: func(e *env, pod string) string {
				id := created(e, pod)
				g := newGate()
				e.f.set("StartObject.run", g.hook)
				go e.srv.StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: id})
				<-g.entered
				e.t.Cleanup(func() { g.release <- nil })
				return id
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			id := tc.prepare(e, e.runPod("web"))
			_, err := e.srv.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: tc.timeout})
			if codeOf(err) != tc.wantCode {
				t.Fatalf("StopContainer: %v, want code %v", err, tc.wantCode)
			}
			st := e.ctrStatus(id)
			if st.State != tc.want || st.ExitCode != tc.wantExit {
				t.Fatalf("container %v %d after the stop, want %v %d", st.State, st.ExitCode, tc.want, tc.wantExit)
			}
			if _, sigs := e.loop.runs(id); !slices.Equal(sigs, tc.wantSigs) {
				t.Fatalf("signals %v, want %v", sigs, tc.wantSigs)
			}
		})
	}
}

func created(e *env, pod string) string {
	e.t.Helper()
	id, err := e.createCtr(context.Background(), pod, "app")
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

func running(e *env, pod string) string {
	e.t.Helper()
	return e.runCtr(pod, "app")
}

// TestStopPodSandboxAsksTheLoop: StopPodSandbox kills what the loop says
// runs (containers, then the pause) and tears the network down; a second
// stop signals nothing.
func TestStopPodSandboxAsksTheLoop(t *testing.T) {
	tests := []struct {
		name string
		// prepare returns the pod's containers; notRunning are the processes
		// (pod or containers) that do not run when the stop comes.
		prepare func(e *env, pod string) (ctrs, notRunning []string)
	}{
		{"all running", func(e *env, pod string) ([]string, []string) {
			return []string{e.runCtr(pod, "a"), e.runCtr(pod, "b")}, nil
		}},
		{"a container exited", func(e *env, pod string) ([]string, []string) {
			a, b := e.runCtr(pod, "a"), e.runCtr(pod, "b")
			e.loop.exitProcess(b, "init", 0)
			return []string{a, b}, []string{b}
		}},
		{"the pause died", func(e *env, pod string) ([]string, []string) {
			a := e.runCtr(pod, "a")
			e.loop.exitProcess(pod, "init", 2)
			return []string{a}, []string{pod}
		}},
		{"a container never started", func(e *env, pod string) ([]string, []string) {
			a := created(e, pod)
			return []string{a}, []string{a}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			pod := e.runPod("web")
			ctrs, notRunning := tc.prepare(e, pod)
			for range 2 {
				if _, err := e.srv.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: pod}); err != nil {
					t.Fatal(err)
				}
			}
			for _, id := range append(ctrs, pod) {
				runs, sigs := e.loop.runs(id)
				want := []syscall.Signal{syscall.SIGKILL}
				if slices.Contains(notRunning, id) {
					want = nil
				}
				if runs || !slices.Equal(sigs, want) {
					t.Errorf("%s: runs %v, signals %v after two stops; want %v", id, runs, sigs, want)
				}
			}
			if st := e.podState(pod); st != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
				t.Errorf("pod %v, want NOTREADY", st)
			}
			if l, m := e.net.leaseIDs(), e.mounts.mounts(); len(l) != 0 || len(m) != 1 {
				t.Errorf("leases %v, mounts %v; want no lease, only the pod's /dev/shm", l, m)
			}
		})
	}
}
