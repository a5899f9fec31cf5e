package server

import (
	"context"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
)

// TestRemovePodDuringCreateContainer: RemovePodSandbox while a
// CreateContainer of the pod is under way. Either the create completes and
// the removal fails until a retry removes the container with the pod, or
// the create fails; never is a container made in a removed pod.
func TestRemovePodDuringCreateContainer(t *testing.T) {
	tests := []struct {
		name string
		// point holds the create there while the pod's removal runs.
		point string
		// createOK: the create completes; else it fails with createCode.
		createOK   bool
		createCode codes.Code
		// removeCode is the first removal's.
		removeCode codes.Code
	}{
		{name: "create holds its name: the removal waits for it", point: "PrepareRootfs",
			createOK: true, removeCode: codes.FailedPrecondition},
		{name: "create recorded, about to commit: the removal takes its name", point: "CommitObject",
			createCode: codes.FailedPrecondition},
		{name: "pod removed before the create reserves", point: "ReserveObject", createCode: codes.NotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			pod := e.runPod("web")
			g := newGate()
			e.f.set(tc.point, g.hook)
			created := make(chan error, 1)
			go func() {
				_, err := e.createCtr(context.Background(), pod, "app")
				created <- err
			}()
			<-g.entered
			err := e.removePod(pod)
			if codeOf(err) != tc.removeCode {
				t.Fatalf("RemovePodSandbox during the create: %v, want %v", err, tc.removeCode)
			}
			g.release <- nil
			err = <-created
			if tc.createOK != (err == nil) || !tc.createOK && codeOf(err) != tc.createCode {
				t.Fatalf("the create: %v; want success %v or code %v", err, tc.createOK, tc.createCode)
			}
			checkNoOrphanContainer(t, e)
			if err := e.removePod(pod); err != nil {
				t.Fatalf("a retried RemovePodSandbox: %v", err)
			}
			e.checkNothingLeft()
		})
	}
	t.Run("free-for-all", func(t *testing.T) {
		e := newEnv(t)
		pod := e.runPod("web")
		var wg sync.WaitGroup
		var createErr error
		wg.Go(func() { _, createErr = e.createCtr(context.Background(), pod, "app") })
		wg.Go(func() { e.removePod(pod) })
		wg.Wait()
		checkNoOrphanContainer(t, e)
		if err := e.removePod(pod); err != nil {
			t.Fatalf("a retried RemovePodSandbox (the create: %v): %v", createErr, err)
		}
		e.checkNothingLeft()
	})
}

// checkNoOrphanContainer: every container object, record and dir belongs
// to a pod the loop has.
func checkNoOrphanContainer(t *testing.T, e *env) {
	t.Helper()
	e.loop.mu.Lock()
	defer e.loop.mu.Unlock()
	for _, o := range e.loop.table.List() {
		if pod, ok := e.loop.table.Get(o.SandboxID); o.SandboxID != "" && (!ok || !pod.Visible()) {
			t.Errorf("container %s is in pod %s, which the loop does not have", o.ID, o.SandboxID)
		}
	}
	for _, c := range e.srv.recs.allContainers() {
		if _, ok := e.loop.table.Get(c.rec.SandboxID); !ok {
			t.Errorf("container record %s is of pod %s, which the loop does not have", c.rec.ID, c.rec.SandboxID)
		}
	}
}
