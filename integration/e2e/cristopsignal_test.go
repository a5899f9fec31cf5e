package e2e

import (
	"path/filepath"
	"testing"

	"github.com/evjournal/containerd/cri/crilog"
	"github.com/evjournal/containerd/integration/fixture"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestCRIStopSignal: StopContainer sends the config's stop_signal, else
// the image's StopSignal, else SIGTERM (containerd's order), and
// ContainerStatus reports it. Each container traps the signals and lives
// on, so the stop's SIGKILL follows after the timeout; the log says which
// signal came first.
func TestCRIStopSignal(t *testing.T) {
	t.Parallel()
	e := newCRIEnv(t)
	ctx := cctx(t)
	quits, _ := e.reg.Push(t, "e2e/stopsignal-quit:1", fixture.TestinitImage(t, v1.Config{Cmd: []string{"sleep", "forever"}, StopSignal: "SIGQUIT"}))
	plain := e.pushTestinit(t, "e2e/stopsignal-plain:1")
	var refs = map[string]string{}
	for _, ref := range []string{quits, plain} {
		pulled, err := e.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		if err != nil {
			t.Fatal(err)
		}
		refs[ref] = pulled.ImageRef
	}
	pod := e.podConfig(t, "stopsignal")
	run, err := e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: pod})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, image string
		config      runtimeapi.Signal
		want        runtimeapi.Signal
		trapped     string
	}{
		{"image", quits, 0, runtimeapi.Signal_SIGNAL_SIGQUIT, "QUIT"},
		{"config", quits, runtimeapi.Signal_SIGNAL_SIGUSR1, runtimeapi.Signal_SIGNAL_SIGUSR1, "USR1"},
		{"default", plain, 0, runtimeapi.Signal_SIGNAL_SIGTERM, "TERM"},
	} {
		cid := startSleeper(t, e, pod, run.PodSandboxId, c.name, refs[c.image], func(cfg *runtimeapi.ContainerConfig) {
			cfg.Args = []string{"trap", "QUIT", "USR1", "TERM", "--", "echo", "ready", "--", "sleep", "forever"}
			cfg.StopSignal, cfg.LogPath = c.config, c.name+".log"
		})
		log := filepath.Join(pod.LogDirectory, c.name+".log")
		waitLog(t, log, func(r []crilog.Record) bool { return len(r) > 0 })
		st, err := e.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: cid})
		if err != nil || st.Status.StopSignal != c.want {
			t.Errorf("%s: ContainerStatus.stop_signal %v (%v), want %v", c.name, st.GetStatus().GetStopSignal(), err, c.want)
		}
		if _, err := e.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: cid, Timeout: 1}); err != nil {
			t.Fatal(err)
		}
		recs := waitLog(t, log, func(r []crilog.Record) bool { return len(r) > 1 })
		if got := string(recs[1].Content); got != "trapped "+c.trapped {
			t.Errorf("%s: the container's first signal: %q, want trapped %s", c.name, got, c.trapped)
		}
		if cs := wantState(t, e, cid, runtimeapi.ContainerState_CONTAINER_EXITED); cs.ExitCode != 137 {
			t.Errorf("%s: exit %d, want 137 (the SIGKILL after the timeout)", c.name, cs.ExitCode)
		}
	}
	removePod(t, e, run.PodSandboxId)
}
