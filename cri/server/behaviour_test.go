package server

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestStopContainerOutlivesItsCaller: a StopContainer whose caller gives
// up during the timeout still kills the container that ignored its first
// signal once the timeout is over (docs/cri.md, Behaviour decisions).
func TestStopContainerOutlivesItsCaller(t *testing.T) {
	e := newEnv(t)
	id := running(e, e.runPod("p"))
	e.loop.mu.Lock()
	e.loop.ignoreTERM[id] = true
	e.loop.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := e.srv.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 1})
		done <- err
	}()
	<-ctx.Done()
	select {
	case err := <-done:
		t.Fatalf("StopContainer returned when its caller gave up (%v), before the timeout's SIGKILL", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := <-done; err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	if st := e.ctrStatus(id); st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 137 {
		t.Fatalf("container %v %d, want EXITED 137", st.State, st.ExitCode)
	}
	if _, sigs := e.loop.runs(id); !slices.Equal(sigs, []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}) {
		t.Fatalf("signals %v, want SIGTERM then SIGKILL", sigs)
	}
}

// TestHostNetworkPodHostname: a pod on the host's network whose config
// names a hostname is accepted, and its /etc/hostname is the host's name,
// the name it has (a pod of its own network gets the config's).
func TestHostNetworkPodHostname(t *testing.T) {
	e := newEnv(t)
	host, _ := os.Hostname()
	for _, c := range []struct {
		network runtimeapi.NamespaceMode
		want    string
	}{{runtimeapi.NamespaceMode_NODE, host}, {runtimeapi.NamespaceMode_POD, "own-name"}} {
		cfg := podConfig("h" + strings.ToLower(c.network.String()))
		cfg.Hostname = "own-name"
		cfg.Linux.SecurityContext.NamespaceOptions.Network = c.network
		pod := e.runPodWith(cfg)
		got, err := os.ReadFile(filepath.Join(e.srv.sandboxDir(pod), "hostname"))
		if err != nil || strings.TrimSpace(string(got)) != c.want {
			t.Errorf("network %v: /etc/hostname %q (%v), want %q", c.network, got, err, c.want)
		}
	}
}
