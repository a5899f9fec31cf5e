package server

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// crashAt runs op until it reaches point, where the daemon dies (op's
// goroutine ends there, no cleanup runs), and returns the id the point was
// reached for.
func (e *env) crashAt(point string, op func()) string {
	var id string
	e.f.set(point, func(x string) error {
		id = x
		return crash(x)
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		op()
	}()
	<-done
	e.f.set(point, nil)
	return id
}

func (e *env) runPodAsync(name string) func() {
	return func() {
		e.srv.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: podConfig(name)})
	}
}

// TestReconcileAtStart: what a crash leaves is put right when the service
// starts again (docs/cri.md, "Restart").
func TestReconcileAtStart(t *testing.T) {
	tests := []struct {
		name string
		// crash leaves the state of a daemon killed at some step; its
		// result is handed to check, after the restart.
		crash func(e *env) string
		check func(t *testing.T, e *env, id string)
	}{
		{"pod cut short in CNI ADD, its lease taken", func(e *env) string {
			return e.crashAt("Setup.after", e.runPodAsync("web"))
		}, checkPodUndone},
		{"pod cut short before its commit", func(e *env) string {
			return e.crashAt("CommitObject", e.runPodAsync("web"))
		}, checkPodUndone},
		{"pod dir with an unreadable record", func(e *env) string {
			id := e.crashAt("MountShm", e.runPodAsync("web"))
			if err := os.WriteFile(filepath.Join(e.srv.sandboxDir(id), "sandbox.json"), []byte("{garbage"), 0o600); err != nil {
				e.t.Fatal(err)
			}
			return id
		}, checkPodUndone},
		{"container cut short after its rootfs", func(e *env) string {
			pod := e.runPod("web")
			e.crashAt("PrepareRootfs.after", func() { e.createCtr(context.Background(), pod, "app") })
			return pod
		}, checkContainerUndone},
		{"container cut short before its commit", func(e *env) string {
			pod := e.runPod("web")
			e.crashAt("CommitObject", func() { e.createCtr(context.Background(), pod, "app") })
			return pod
		}, checkContainerUndone},
		{"container removal cut short after its record", func(e *env) string {
			pod := e.runPod("web")
			c := e.runCtr(pod, "app")
			e.crashAt("RemoveObject", func() {
				e.srv.RemoveContainer(context.Background(), &runtimeapi.RemoveContainerRequest{ContainerId: c})
			})
			return pod
		}, checkContainerUndone},
		{"a running container whose record is gone", func(e *env) string {
			pod := e.runPod("web")
			c := e.runCtr(pod, "app")
			if err := os.RemoveAll(e.srv.containerDir(c)); err != nil {
				e.t.Fatal(err)
			}
			return pod
		}, checkContainerUndone},
		{"pod removal cut short after its record", func(e *env) string {
			pod := e.runPod("web")
			e.crashAt("RemoveObject", func() { e.removePod(pod) })
			return pod
		}, func(t *testing.T, e *env, _ string) { e.checkNothingLeft() }},
		{"pod removal cut short after its dir was retired", func(e *env) string {
			pod := e.runPod("web")
			e.stopPod(pod)
			// The removal's steps up to the crash: its shm and rootfs
			// gone, its dir retired whole into the removing dir.
			if _, err := e.srv.removeSandboxFiles(pod, e.srv.shmPath(pod)); err != nil {
				e.t.Fatal(err)
			}
			return pod
		}, checkPodUndone},
		{"container removal cut short after its dir was retired", func(e *env) string {
			pod := e.runPod("web")
			c := e.runCtr(pod, "app")
			e.stopCtr(c)
			if err := e.srv.cfg.Images.RemoveRootfs(c); err != nil {
				e.t.Fatal(err)
			}
			if _, err := e.srv.retireRecordDir(e.srv.containerDir(c)); err != nil {
				e.t.Fatal(err)
			}
			return pod
		}, checkContainerUndone},
		// A daemon that removed a dir file by file, record first, died
		// in the middle: the dir is there, its record is not, its object is.
		{"pod dir whose record a removal took", func(e *env) string {
			pod := e.runPod("web")
			e.stopPod(pod)
			dropRecord(e, e.srv.sandboxDir(pod), "sandbox.json")
			return pod
		}, checkPodUndone},
		{"container dir whose record a removal took", func(e *env) string {
			pod := e.runPod("web")
			c := e.runCtr(pod, "app")
			e.stopCtr(c)
			dropRecord(e, e.srv.containerDir(c), "container.json")
			return pod
		}, checkContainerUndone},
		{"a rootfs of no container", func(e *env) string {
			if _, err := e.images.PrepareRootfs("orphan", testImage); err != nil {
				e.t.Fatal(err)
			}
			return ""
		}, func(t *testing.T, e *env, _ string) { e.checkNothingLeft() }},
		{"the output FIFOs of exec calls cut short", func(e *env) string {
			for _, name := range []string{"c1-execsync-1", "c2-exec-2"} {
				dir := filepath.Join(e.srv.cfg.StateDir, "exec", name)
				if err := os.MkdirAll(dir, 0o700); err != nil {
					e.t.Fatal(err)
				}
				if err := unix.Mkfifo(filepath.Join(dir, "stdout"), 0o600); err != nil {
					e.t.Fatal(err)
				}
			}
			return ""
		}, func(t *testing.T, e *env, _ string) {
			ents, err := os.ReadDir(filepath.Join(e.srv.cfg.StateDir, "exec"))
			if err != nil {
				t.Fatal(err)
			}
			if len(ents) != 0 {
				t.Errorf("exec dirs left after the restart: %v", ents)
			}
		}},
		{"created container's rootfs after a reboot", func(e *env) string {
			pod := e.runPod("web")
			c := created(e, pod)
			e.runCtr(pod, "other")
			e.images.reboot()
			return c
		}, checkRemounted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			id := tc.crash(e)
			e.restart()
			tc.check(t, e, id)
			checkRecordsMatchObjects(t, e)
		})
	}
}

// dropRecord removes dir's record and leaves another file in it.
func dropRecord(e *env, dir, record string) {
	e.t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "left"), nil, 0o600); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, record)); err != nil {
		e.t.Fatal(err)
	}
}

// checkPodUndone: nothing of the pod is left, and its name is free.
func checkPodUndone(t *testing.T, e *env, _ string) {
	t.Helper()
	e.checkNothingLeft()
	checkOnePod(t, e, e.runPod("web"))
}

// checkContainerUndone: only the pod is left, READY, and the container's
// name is free.
func checkContainerUndone(t *testing.T, e *env, pod string) {
	t.Helper()
	checkOnlyPod(t, e, pod)
	if runs := e.loop.runningIDs(); !slices.Equal(runs, []string{pod}) {
		t.Errorf("processes %v, want only the pod's pause", runs)
	}
	if st := e.podState(pod); st != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Errorf("pod %v, want READY", st)
	}
	if _, err := e.createCtr(context.Background(), pod, "app"); err != nil {
		t.Errorf("a new create of the name: %v", err)
	}
}

// checkRemounted: the created container's rootfs, and only it, was mounted
// again.
func checkRemounted(t *testing.T, e *env, c string) {
	t.Helper()
	var mounted []string
	for _, call := range e.f.calls("MountRootfs") {
		mounted = append(mounted, call.id)
	}
	if !slices.Equal(mounted, []string{c}) {
		t.Errorf("rootfs mounted again: %v, want only the created container's %s", mounted, c)
	}
	for _, r := range e.images.ListRootfs() {
		if r.ContainerID == c && !r.Mounted {
			t.Errorf("the created container's rootfs is not mounted")
		}
	}
}

// checkRecordsMatchObjects: every record has its object and every object
// its record.
func checkRecordsMatchObjects(t *testing.T, e *env) {
	t.Helper()
	var recs []string
	for _, sb := range e.srv.recs.allSandboxes() {
		recs = append(recs, sb.rec.ID)
	}
	for _, c := range e.srv.recs.allContainers() {
		recs = append(recs, c.rec.ID)
	}
	slices.Sort(recs)
	if objs := e.loop.objectIDs(); !slices.Equal(recs, objs) {
		t.Errorf("records %v, objects %v", recs, objs)
	}
}

// TestReconcileImportsOldRecords: records an older daemon wrote with the
// lifecycle in them are imported into the loop once: what still runs is
// RUNNING, what is gone is EXITED (255 when its exit is unknown), a created
// container's rootfs is mounted.
func TestReconcileImportsOldRecords(t *testing.T) {
	e := newEnv(t)
	pod := writeOldPod(e, "web", legacyReady)
	ctrs := []struct {
		name, state string
		exit        int32
		runs        bool
		want        runtimeapi.ContainerState
		wantExit    int32
	}{
		{name: "exited", state: legacyExited, exit: 2, want: runtimeapi.ContainerState_CONTAINER_EXITED, wantExit: 2},
		{name: "still-running", state: legacyRunning, runs: true, want: runtimeapi.ContainerState_CONTAINER_RUNNING},
		{name: "gone", state: legacyRunning, want: runtimeapi.ContainerState_CONTAINER_EXITED, wantExit: 255},
		{name: "created", state: legacyCreated, want: runtimeapi.ContainerState_CONTAINER_CREATED},
	}
	ids := map[string]string{}
	for _, c := range ctrs {
		ids[c.name] = writeOldContainer(e, pod, c.name, legacyLifecycle{State: c.state, ExitCode: c.exit}, c.runs)
	}
	e.restart()
	for _, c := range ctrs {
		t.Run(c.name, func(t *testing.T) {
			st := e.ctrStatus(ids[c.name])
			if st.State != c.want || st.ExitCode != c.wantExit {
				t.Fatalf("%v %d, want %v %d", st.State, st.ExitCode, c.want, c.wantExit)
			}
		})
	}
	if st := e.podState(pod); st != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Errorf("a ready pod whose pause is gone: %v, want NOTREADY", st)
	}
	checkRemounted(t, e, ids["created"])
	checkRecordsMatchObjects(t, e)
	if n := len(e.f.calls("ImportObjects")); n != 1 {
		t.Errorf("%d imports, want 1", n)
	}
	e.restart()
	if n := len(e.f.calls("ImportObjects")); n != 1 {
		t.Errorf("a second restart imported again (%d imports)", n)
	}
}

// writeOldPod writes the record of a pod an older daemon made.
func writeOldPod(e *env, name, state string) string {
	e.t.Helper()
	raw, err := marshalProto(podConfig(name))
	if err != nil {
		e.t.Fatal(err)
	}
	id := newID()
	if err := writeRecord(e.srv.sandboxDir(id), "sandbox.json", &sandboxRecord{ID: id, Config: raw, CreatedAt: 1, State: state}); err != nil {
		e.t.Fatal(err)
	}
	return id
}

// writeOldContainer writes the record (and rootfs) of a container an
// older daemon made; runs: its process still runs.
func writeOldContainer(e *env, pod, name string, l legacyLifecycle, runs bool) string {
	e.t.Helper()
	raw, err := marshalProto(ctrConfig(name))
	if err != nil {
		e.t.Fatal(err)
	}
	id := newID()
	rec := containerRecord{ID: id, SandboxID: pod, Config: raw, ImageID: testImageID, CreatedAt: 2, legacyLifecycle: l}
	if err := writeRecord(e.srv.containerDir(id), "container.json", &rec); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.images.PrepareRootfs(id, testImage); err != nil {
		e.t.Fatal(err)
	}
	if runs {
		e.loop.mu.Lock()
		e.loop.lastPid++
		e.loop.ctrs[id] = &fakeCtr{incarnation: l.Incarnation, procs: map[string]*fakeProc{"init": {pid: e.loop.lastPid}}}
		e.loop.mu.Unlock()
	}
	return id
}
