package server

import (
	"context"
	"errors"
	"slices"
	"sync"
	"syscall"
	"testing"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestStartContainerTwice: a start goes through the loop's transition, so
// a second StartContainer, during the first or after it, is refused
// (FailedPrecondition) and the process is started once.
func TestStartContainerTwice(t *testing.T) {
	for _, during := range []bool{true, false} {
		t.Run(map[bool]string{true: "during the first", false: "after the first"}[during], func(t *testing.T) {
			e := newEnv(t)
			pod := e.runPod("web")
			id, err := e.createCtr(context.Background(), pod, "app")
			if err != nil {
				t.Fatal(err)
			}
			g := newGate()
			e.f.set("StartObject.run", g.hook)
			start := func() error {
				_, err := e.srv.StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: id})
				return err
			}
			first := make(chan error, 1)
			go func() { first <- start() }()
			<-g.entered
			if !during {
				g.release <- nil
				if err := <-first; err != nil {
					t.Fatal(err)
				}
			}
			wantCode(t, start(), codes.FailedPrecondition, id)
			if during {
				g.release <- nil
				if err := <-first; err != nil {
					t.Fatalf("the first start: %v", err)
				}
			}
			if st := e.ctrStatus(id); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
				t.Fatalf("container %v, want RUNNING", st.State)
			}
			if n := countEvents(e.j, "start-container", id); n != 1 {
				t.Fatalf("the container was started %d times, want once", n)
			}
		})
	}
}

// TestStartContainerManyAtOnce: of concurrent starts of one container,
// exactly one succeeds, the others are FailedPrecondition.
func TestStartContainerManyAtOnce(t *testing.T) {
	e := newEnv(t)
	id := created(e, e.runPod("web"))
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			_, errs[i] = e.srv.StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: id})
		})
	}
	close(start)
	wg.Wait()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
		} else {
			wantCode(t, err, codes.FailedPrecondition, id)
		}
	}
	if won != 1 || countEvents(e.j, "start-container", id) != 1 {
		t.Fatalf("%d starts succeeded, %d start-container events; want 1 and 1", won, countEvents(e.j, "start-container", id))
	}
}

// countEvents is how many events of type typ the journal holds for id.
func countEvents(j *fakeJournal, typ, id string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for _, ev := range j.events {
		if ev.Type == typ && ev.ID == id {
			n++
		}
	}
	return n
}

// TestStartOutlivesItsCaller: StartContainer's caller gives up after the
// process started, before the reply: the call fails, the container is
// RUNNING all the same (the loop's start went on, and nothing undid it),
// and a later StopContainer kills it.
func TestStartOutlivesItsCaller(t *testing.T) {
	e := newEnv(t)
	pod := e.runPod("web")
	id, err := e.createCtr(context.Background(), pod, "app")
	if err != nil {
		t.Fatal(err)
	}
	g := newGate()
	e.f.set("StartObject.after", g.hook)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := e.srv.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
		done <- err
	}()
	<-g.entered
	cancel()
	wantCode(t, <-done, codes.Canceled)
	g.release <- nil
	e.loop.work.Wait()
	if st := e.ctrStatus(id); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("container %v after its start's caller gave up, want RUNNING", st.State)
	}
	if runs, _ := e.loop.runs(id); !runs {
		t.Fatal("the container's process does not run")
	}
	if _, err := e.srv.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	st := e.ctrStatus(id)
	if runs, sigs := e.loop.runs(id); runs || !slices.Equal(sigs, []syscall.Signal{syscall.SIGKILL}) {
		t.Fatalf("after the stop: runs %v, signals %v; want killed", runs, sigs)
	}
	if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 137 {
		t.Fatalf("container %v %d after the stop, want EXITED 137", st.State, st.ExitCode)
	}
}

// TestStartThatRunsNothing: a start whose process could not be created
// fails, and the loop says why: EXITED 128, StartError.
func TestStartThatRunsNothing(t *testing.T) {
	e := newEnv(t)
	pod := e.runPod("web")
	id, err := e.createCtr(context.Background(), pod, "app")
	if err != nil {
		t.Fatal(err)
	}
	e.f.set("StartObject.run", failWith(errors.New("runc create: exec format error")))
	_, err = e.srv.StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: id})
	if err == nil {
		t.Fatal("the start succeeded")
	}
	st := e.ctrStatus(id)
	if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 128 || st.Reason != "StartError" {
		t.Fatalf("container %v %d %q, want EXITED 128 StartError", st.State, st.ExitCode, st.Reason)
	}
}
