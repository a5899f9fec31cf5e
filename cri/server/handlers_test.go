package server

import (
	"context"
	"errors"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The unit tests run no runtime: every handler has both features, but one
// whose runtime is noFeaturesRuntime, which has none (as crun 1.8, which
// has no `features` command).
const noFeaturesRuntime = "/fake/old-crun"

func init() {
	probeHandlerFeatures = func(h RuntimeHandler) (*runtimeapi.RuntimeHandlerFeatures, error) {
		if h.Runtime == noFeaturesRuntime {
			return &runtimeapi.RuntimeHandlerFeatures{}, errors.New("unknown command features")
		}
		return &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: true, UserNamespaces: true}, nil
	}
}

// withHandlers restarts e's service (not its loop) with these handlers.
func (e *env) withHandlers(hs ...RuntimeHandler) {
	e.t.Helper()
	e.srv.Close()
	e.cfg.RuntimeHandlers = hs
	e.start()
}

func (e *env) runPodOn(name, handler string) (string, error) {
	r, err := e.srv.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: podConfig(name), RuntimeHandler: handler})
	return r.GetPodSandboxId(), err
}

var crunHandler = RuntimeHandler{Name: "crun", Runtime: "/usr/bin/crun", Args: []string{"--root=/run/crun-test"}}

// TestRuntimeHandlers: Status lists the default handler and each
// configured one with its features; a pod of a handler runs its pause and
// its containers through that handler's runtime and args, a pod of the
// default leaves the supervisor's runtime; the pod's status names its
// handler; an unknown handler is NotFound and leaves nothing.
func TestRuntimeHandlers(t *testing.T) {
	e := newEnv(t)
	e.withHandlers(crunHandler, RuntimeHandler{Name: "old", Runtime: noFeaturesRuntime})
	st, err := e.srv.Status(context.Background(), &runtimeapi.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, h := range st.RuntimeHandlers {
		names = append(names, h.Name)
		want := h.Name != "old"
		if h.Features.GetUserNamespaces() != want || h.Features.GetRecursiveReadOnlyMounts() != want {
			t.Errorf("handler %q: features %v, want both %v", h.Name, h.Features, want)
		}
	}
	if !slices.Equal(names, []string{"", "crun", "old"}) {
		t.Fatalf("Status lists the handlers %q, want the default, crun, old", names)
	}

	_, err = e.runPodOn("kata", "kata")
	wantCode(t, err, codes.NotFound, `"kata"`, `"crun"`)
	e.checkNothingLeft()

	crunPod, err := e.runPodOn("on-crun", "crun")
	if err != nil {
		t.Fatal(err)
	}
	defPod := e.runPod("on-default")
	legacy, err := e.runPodOn("on-runc", "runc") // the default's old name
	if err != nil {
		t.Fatal(err)
	}
	crunCtr, defCtr := e.runCtr(crunPod, "c"), e.runCtr(defPod, "c")
	for _, id := range []string{crunPod, crunCtr} {
		if r := e.loop.created(id); r.Runtime != crunHandler.Runtime || !slices.Equal(r.RuntimeArgs, crunHandler.Args) {
			t.Errorf("%s started with runtime %q %q, want crun's", id, r.Runtime, r.RuntimeArgs)
		}
	}
	for _, id := range []string{defPod, defCtr, legacy} {
		if r := e.loop.created(id); r.Runtime != "" || r.RuntimeArgs != nil {
			t.Errorf("%s of the default handler started with runtime %q %q, want the supervisor's", id, r.Runtime, r.RuntimeArgs)
		}
	}
	for pod, want := range map[string]string{crunPod: "crun", defPod: "", legacy: ""} {
		r, err := e.srv.PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: pod})
		if err != nil || r.Status.RuntimeHandler != want {
			t.Errorf("pod %s: runtime handler %q (%v), want %q", pod, r.GetStatus().GetRuntimeHandler(), err, want)
		}
	}
	l, err := e.srv.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range l.Items {
		if want := map[bool]string{true: "crun"}[p.Id == crunPod]; p.RuntimeHandler != want {
			t.Errorf("ListPodSandbox: pod %s on %q, want %q", p.Id, p.RuntimeHandler, want)
		}
	}
}

// TestRuntimeHandlerAfterRestart: a pod keeps its handler across a
// restart (the record names it): a container made after it still runs
// through the pod's runtime. A daemon restarted without that handler
// refuses to create or start the pod's containers (FailedPrecondition,
// naming it) rather than run them on another runtime than the pod's, and
// the pod can still be removed.
func TestRuntimeHandlerAfterRestart(t *testing.T) {
	e := newEnv(t)
	e.withHandlers(crunHandler)
	pod, err := e.runPodOn("p", "crun")
	if err != nil {
		t.Fatal(err)
	}
	e.restart()
	c := e.runCtr(pod, "after")
	if r := e.loop.created(c); r.Runtime != crunHandler.Runtime {
		t.Fatalf("a container made after the restart runs on %q, want the pod's crun", r.Runtime)
	}
	created, err := e.createCtr(context.Background(), pod, "created")
	if err != nil {
		t.Fatal(err)
	}
	e.withHandlers()
	_, err = e.createCtr(context.Background(), pod, "orphaned")
	wantCode(t, err, codes.FailedPrecondition, `"crun"`)
	_, err = e.srv.StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: created})
	wantCode(t, err, codes.FailedPrecondition, `"crun"`)
	if err := e.removePod(pod); err != nil {
		t.Fatal(err)
	}
	e.checkNothingLeft()
}

// TestRuntimeHandlerUserNS: a user-namespaced pod on a handler that does
// not advertise user namespaces is refused (InvalidArgument naming the
// handler) and leaves nothing; on one that does it runs.
func TestRuntimeHandlerUserNS(t *testing.T) {
	e := newEnv(t)
	e.withHandlers(RuntimeHandler{Name: "old", Runtime: noFeaturesRuntime}, crunHandler)
	cfg := podConfig("userns")
	cfg.Linux.SecurityContext.NamespaceOptions.UsernsOptions = &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD,
		Uids: []*runtimeapi.IDMapping{{HostId: 1 << 20, ContainerId: 0, Length: 65536}},
		Gids: []*runtimeapi.IDMapping{{HostId: 1 << 20, ContainerId: 0, Length: 65536}}}
	_, err := e.srv.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: cfg, RuntimeHandler: "old"})
	wantCode(t, err, codes.InvalidArgument, `"old"`, "user namespaces")
	e.checkNothingLeft()
}

// TestHandlerFeaturesFrom reads runtimes' features documents.
func TestHandlerFeaturesFrom(t *testing.T) {
	for _, c := range []struct {
		doc         string
		rro, userns bool
	}{
		{`{"mountOptions": ["bind", "rro"], "linux": {"namespaces": ["user", "mount"], "mountExtensions": {"idmap": {"enabled": true}}}}`, true, true},
		{`{"mountOptions": ["bind"], "linux": {"namespaces": ["user"], "mountExtensions": {"idmap": {"enabled": false}}}}`, false, false},
		{`{"mountOptions": ["rro"], "linux": {"namespaces": ["mount"], "mountExtensions": {"idmap": {"enabled": true}}}}`, true, false},
		{`{"linux": {"namespaces": ["user"]}}`, false, false},
	} {
		f, err := handlerFeaturesFrom([]byte(c.doc))
		if err != nil || f.RecursiveReadOnlyMounts != c.rro || f.UserNamespaces != c.userns {
			t.Errorf("%s: %v %v, want rro %v userns %v", c.doc, f, err, c.rro, c.userns)
		}
	}
	if _, err := handlerFeaturesFrom([]byte("runc: unknown command")); err == nil {
		t.Error("a document that is no JSON is read")
	}
}

// TestRuntimeHandlerNoUserNSOptions: a pod without userns options (whose
// mode reads as POD, the enum's zero value) runs on a handler without
// the feature.
func TestRuntimeHandlerNoUserNSOptions(t *testing.T) {
	e := newEnv(t)
	e.withHandlers(RuntimeHandler{Name: "old", Runtime: noFeaturesRuntime})
	if _, err := e.runPodOn("plain", "old"); err != nil {
		t.Fatal(err)
	}
}

// TestOlderMinor: a runtime is given its own spec version only when it is
// an older minor of the same major than the daemon's specs.
func TestOlderMinor(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"1.0.0", "1.3.0", true}, {"1.0.2-dev", "1.3.0", true}, {"1.0.0-rc2-dev", "1.3.0", true},
		{"1.3.0", "1.3.0", false}, {"1.4.0", "1.3.0", false}, {"2.0.0", "1.3.0", false}, {"0.6.0", "1.3.0", false}, {"", "1.3.0", false}, {"x", "1.3.0", false},
	} {
		if got := olderMinor(c.a, c.b); got != c.want {
			t.Errorf("olderMinor(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
