package server

import (
	"context"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/evjournal/containerd/cri/ocispec"
	"github.com/evjournal/containerd/image"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestParseSignal reads the names images give their StopSignal.
func TestParseSignal(t *testing.T) {
	for in, want := range map[string]syscall.Signal{
		"SIGQUIT": syscall.SIGQUIT, "quit": syscall.SIGQUIT, "3": syscall.SIGQUIT, " SIGUSR1 ": syscall.SIGUSR1,
		"SIGCLD": syscall.SIGCHLD, "SIGPOLL": syscall.SIGIO, "IOT": syscall.SIGABRT,
		"SIGRTMIN": 34, "SIGRTMIN+3": 37, "RTMAX-1": 63, "SIGRTMAX": 64,
	} {
		if got, err := parseSignal(in); err != nil || got != want {
			t.Errorf("parseSignal(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "SIGFOO", "0", "65", "-1", "SIGRTMIN+31", "RTMAX-x"} {
		if got, err := parseSignal(bad); err == nil {
			t.Errorf("parseSignal(%q) = %d, want an error", bad, got)
		}
	}
}

// TestCRISignals: every signal of the CRI's enum names a signal that
// parses, and comes back as the same enum value in a status.
func TestCRISignals(t *testing.T) {
	for v := range runtimeapi.Signal_name {
		sig := runtimeapi.Signal(v)
		name, err := criSignalName(sig)
		if sig == runtimeapi.Signal_SIGNAL_RUNTIME_DEFAULT {
			if name != "" || err != nil {
				t.Errorf("RUNTIME_DEFAULT: %q %v", name, err)
			}
			continue
		}
		n, err := parseSignal(name)
		if err != nil {
			t.Errorf("%v: %q does not parse: %v", sig, name, err)
			continue
		}
		back := toCRISignal(signalName(n))
		// Aliases come back as the signal's own name.
		if alias := strings.TrimPrefix(name, "SIG"); signalAliases[alias] != "" {
			back = toCRISignal("SIG" + alias)
		}
		if back != sig {
			t.Errorf("%v: %q is %d, reported as %v", sig, name, n, back)
		}
	}
	if _, err := criSignalName(runtimeapi.Signal(999)); err == nil {
		t.Error("a value out of the enum is taken")
	}
}

// TestStopSignal: StopContainer sends the config's stop_signal first, else
// the image's StopSignal, else SIGTERM (then SIGKILL after the timeout),
// and ContainerStatus reports it; an image whose StopSignal names no
// signal cannot be created (InvalidArgument naming it), leaving nothing.
func TestStopSignal(t *testing.T) {
	const quitImage, badImage = "example.com/quits:1", "example.com/bad:1"
	for _, c := range []struct {
		name   string
		image  string
		config runtimeapi.Signal
		want   syscall.Signal
	}{
		{"default", testImage, 0, syscall.SIGTERM},
		{"image", quitImage, 0, syscall.SIGQUIT},
		{"config over image", quitImage, runtimeapi.Signal_SIGNAL_SIGUSR1, syscall.SIGUSR1},
		{"config", testImage, runtimeapi.Signal_SIGNAL_SIGRTMINPLUS1, 35},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			e.images.add(quitImage, image.Image{ID: "sha256:" + strings.Repeat("9", 64), Config: ocispec.ImageConfig{Cmd: []string{"x"}, StopSignal: "QUIT"}})
			pod := e.runPod("p")
			cfg := ctrConfig("c")
			cfg.Image.Image, cfg.StopSignal = c.image, c.config
			r, err := e.srv.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: cfg})
			if err != nil {
				t.Fatal(err)
			}
			id := r.ContainerId
			if _, err := e.srv.StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
				t.Fatal(err)
			}
			if got := e.ctrStatus(id).StopSignal; got != toCRISignal(signalName(c.want)) || got == runtimeapi.Signal_SIGNAL_RUNTIME_DEFAULT {
				t.Errorf("ContainerStatus.stop_signal %v, want %v", got, signalName(c.want))
			}
			e.restart() // from the record
			timeout := int64(1)
			if c.want == syscall.SIGTERM {
				timeout = 10 // the fake exits on SIGTERM
			}
			if _, err := e.srv.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: timeout}); err != nil {
				t.Fatal(err)
			}
			want := []syscall.Signal{c.want}
			if c.want != syscall.SIGTERM {
				want = append(want, syscall.SIGKILL) // the fake lives through other signals
			}
			if _, sigs := e.loop.runs(id); !slices.Equal(sigs, want) {
				t.Errorf("signals %v, want %v", sigs, want)
			}
		})
	}
	t.Run("bad image", func(t *testing.T) {
		e := newEnv(t)
		e.images.add(badImage, image.Image{ID: "sha256:" + strings.Repeat("8", 64), Config: ocispec.ImageConfig{Cmd: []string{"x"}, StopSignal: "SIGFOO"}})
		pod := e.runPod("p")
		cfg := ctrConfig("c")
		cfg.Image.Image = badImage
		_, err := e.srv.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: cfg})
		wantCode(t, err, codes.InvalidArgument, "StopSignal", "SIGFOO")
		if err := e.removePod(pod); err != nil {
			t.Fatal(err)
		}
		e.checkNothingLeft()
	})
}
