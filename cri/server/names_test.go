package server

import (
	"context"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestRunPodSandboxSameMetadata: two RunPodSandbox of one pod attempt; the
// name is reserved before any slow step, so exactly one wins and the others
// are AlreadyExists naming the winner, also while the winner is still being
// made. The losers' cleanups leave the winner whole.
func TestRunPodSandboxSameMetadata(t *testing.T) {
	t.Run("second while the first is in CNI ADD", func(t *testing.T) {
		e := newEnv(t)
		g := newGate()
		e.f.set("Setup", g.hook)
		first := make(chan error, 1)
		go func() {
			_, err := e.srv.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: podConfig("web")})
			first <- err
		}()
		holder := <-g.entered
		_, err := e.srv.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: podConfig("web")})
		wantCode(t, err, codes.AlreadyExists, holder)
		g.release <- nil
		if err := <-first; err != nil {
			t.Fatalf("the first RunPodSandbox: %v", err)
		}
		checkOnePod(t, e, holder)
	})
	t.Run("many at once", func(t *testing.T) {
		e := newEnv(t)
		const n = 8
		var wg sync.WaitGroup
		ids, errs := make([]string, n), make([]error, n)
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				r, err := e.srv.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: podConfig("web")})
				ids[i], errs[i] = r.GetPodSandboxId(), err
			})
		}
		close(start)
		wg.Wait()
		var winner string
		for i, err := range errs {
			if err == nil {
				if winner != "" {
					t.Fatalf("two RunPodSandbox of one pod attempt succeeded: %s and %s", winner, ids[i])
				}
				winner = ids[i]
			}
		}
		if winner == "" {
			t.Fatalf("no RunPodSandbox succeeded: %v", errs)
		}
		for _, err := range errs {
			if err != nil {
				wantCode(t, err, codes.AlreadyExists, winner)
			}
		}
		checkOnePod(t, e, winner)
	})
}

// checkOnePod: id is the one pod, READY, with the one lease and netns.
func checkOnePod(t *testing.T, e *env, id string) {
	t.Helper()
	pods, _ := e.listed()
	if len(pods) != 1 || pods[0] != id {
		t.Fatalf("pods listed %v, want only %s", pods, id)
	}
	if st := e.podState(id); st != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("pod %s is %v, want READY", id, st)
	}
	if l := e.net.leaseIDs(); len(l) != 1 || l[0] != id {
		t.Fatalf("leases %v, want only %s's", l, id)
	}
	if d := e.dirs("sandboxes"); len(d) != 1 || d[0] != id {
		t.Fatalf("pod dirs %v, want only %s's", d, id)
	}
}

// TestCreateContainerSameName: a container's name and attempt are reserved
// in its pod before its rootfs is made: a second create of them is
// AlreadyExists naming the holder, while the first is made and after; a
// new attempt, or the same name in another pod, is another name.
func TestCreateContainerSameName(t *testing.T) {
	tests := []struct {
		name string
		// second makes the second request from the first's pod and config.
		second func(e *env, pod string, cfg *runtimeapi.ContainerConfig) (*runtimeapi.CreateContainerRequest, codes.Code)
	}{
		{"same name and attempt", func(e *env, pod string, cfg *runtimeapi.ContainerConfig) (*runtimeapi.CreateContainerRequest, codes.Code) {
			return &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: cfg}, codes.AlreadyExists
		}},
		{"next attempt", func(e *env, pod string, cfg *runtimeapi.ContainerConfig) (*runtimeapi.CreateContainerRequest, codes.Code) {
			cfg.Metadata.Attempt++
			return &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: cfg}, codes.OK
		}},
		{"same name in another pod", func(e *env, _ string, cfg *runtimeapi.ContainerConfig) (*runtimeapi.CreateContainerRequest, codes.Code) {
			return &runtimeapi.CreateContainerRequest{PodSandboxId: e.runPod("other"), Config: cfg}, codes.OK
		}},
	}
	for _, tc := range tests {
		for _, held := range []bool{true, false} {
			name := tc.name + map[bool]string{true: ", the first being made", false: ", the first made"}[held]
			t.Run(name, func(t *testing.T) {
				e := newEnv(t)
				pod := e.runPod("web")
				req, want := tc.second(e, pod, ctrConfig("app"))
				g := newGate()
				e.f.set("PrepareRootfs", g.hook)
				first := make(chan error, 1)
				go func() {
					_, err := e.createCtr(context.Background(), pod, "app")
					first <- err
				}()
				holder := <-g.entered
				if !held {
					g.release <- nil
					if err := <-first; err != nil {
						t.Fatal(err)
					}
				}
				_, err := e.srv.CreateContainer(context.Background(), req)
				if want == codes.OK && err != nil {
					t.Fatalf("second create: %v", err)
				} else if want != codes.OK {
					wantCode(t, err, want, holder)
				}
				if held {
					g.release <- nil
					if err := <-first; err != nil {
						t.Fatalf("the first create: %v", err)
					}
				}
				if st := e.ctrStatus(holder); st.State != runtimeapi.ContainerState_CONTAINER_CREATED {
					t.Fatalf("the first container is %v, want CREATED", st.State)
				}
			})
		}
	}
}

// TestLostReplyFreesTheName: the loop reserved or committed, but the
// caller's context ended before the reply came (the caller sees its
// context's error, as from the real loop's call). The request's cleanup
// must free the name and the object all the same: a retry of the same name
// succeeds, and nothing of the first is left.
func TestLostReplyFreesTheName(t *testing.T) {
	for _, point := range []string{"ReserveObject.after", "CommitObject.after"} {
		t.Run("pod, "+point, func(t *testing.T) {
			e := newEnv(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			e.f.set(point, cancelOnce(cancel))
			_, err := e.srv.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podConfig("web")})
			wantCode(t, err, codes.Canceled)
			checkOnePod(t, e, e.runPod("web"))
		})
		t.Run("container, "+point, func(t *testing.T) {
			e := newEnv(t)
			pod := e.runPod("web")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			e.f.set(point, cancelOnce(cancel))
			_, err := e.createCtr(ctx, pod, "app")
			wantCode(t, err, codes.Canceled)
			id, err := e.createCtr(context.Background(), pod, "app")
			if err != nil {
				t.Fatalf("a retry of the create: %v", err)
			}
			if _, ctrs := e.listed(); len(ctrs) != 1 || ctrs[0] != id {
				t.Fatalf("containers %v, want only %s", ctrs, id)
			}
			if err := e.removePod(pod); err != nil {
				t.Fatal(err)
			}
			e.checkNothingLeft()
		})
	}
}
