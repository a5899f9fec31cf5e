package e2e

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evjournal/containerd/integration/fixture"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestCRIValidation: what a client sends that would reach a path, a line
// of a pod's file or every List reply is refused with InvalidArgument
// naming it, and leaves nothing: a hostname with a newline (it went into
// /etc/hosts) or of 300 bytes (runc's Internal), a relative
// log_directory, 1 MiB of annotations (a request takes up to 4 MiB: five
// such pods made every ListPodSandbox exceed kubelet's 16 MiB), a log_path out of the log
// directory (the log was written there), mount_options that undo the
// daemon's read-only.
func TestCRIValidation(t *testing.T) {
	t.Parallel()
	e := newCRIEnv(t)
	ctx := cctx(t)
	ref := e.pushTestinit(t, "e2e/validate:1")
	pulled, err := e.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		what string
		bend func(*runtimeapi.PodSandboxConfig)
		want string
	}{
		{"a hostname with a newline", func(c *runtimeapi.PodSandboxConfig) { c.Hostname = "pod\n10.9.9.9 kubernetes.default" }, "is not an RFC 1123 host name"},
		{"a hostname of 300 bytes", func(c *runtimeapi.PodSandboxConfig) { c.Hostname = strings.Repeat("h", 300) }, "300 bytes, more than the kernel's 64"},
		{"a relative log_directory", func(c *runtimeapi.PodSandboxConfig) { c.LogDirectory = "relative/logs" }, "log_directory: \"relative/logs\" is not an absolute path"},
		{"1 MiB of annotations", func(c *runtimeapi.PodSandboxConfig) {
			c.Annotations = map[string]string{"a": strings.Repeat("x", 512<<10), "b": strings.Repeat("y", 512<<10)}
		}, "annotations: 1048594 bytes in all"},
		{"a DNS search with a newline", func(c *runtimeapi.PodSandboxConfig) {
			c.DnsConfig = &runtimeapi.DNSConfig{Searches: []string{"svc.local\nnameserver 6.6.6.6"}}
		}, "dns_config.searches[0]"},
	} {
		cfg := e.podConfig(t, "bad-pod")
		bad.bend(cfg)
		_, err := e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
		wantCRICode(t, "RunPodSandbox with "+bad.what, err, codes.InvalidArgument)
		if !strings.Contains(err.Error(), bad.want) {
			t.Errorf("RunPodSandbox with %s: %v, want it to say %q", bad.what, err, bad.want)
		}
	}

	podCfg := e.podConfig(t, "validate")
	run, err := e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podCfg})
	if err != nil {
		t.Fatal(err)
	}
	escape := filepath.Join(filepath.Dir(podCfg.LogDirectory), "escaped.log")
	vol := t.TempDir()
	for _, bad := range []struct {
		what string
		cfg  *runtimeapi.ContainerConfig
		want string
	}{
		{"a log_path out of the log directory", &runtimeapi.ContainerConfig{LogPath: "../escaped.log"}, "log_path: \"../escaped.log\" leaves the pod's log_directory"},
		{"rw over a read-only mount", &runtimeapi.ContainerConfig{Mounts: []*runtimeapi.Mount{{ContainerPath: "/vol", HostPath: vol, Readonly: true, MountOptions: []string{"rw"}}}},
			"mount[0] (/vol) mount_options: \"rw\" is not allowed"},
		{"suid on a mount", &runtimeapi.ContainerConfig{Mounts: []*runtimeapi.Mount{{ContainerPath: "/vol", HostPath: vol, MountOptions: []string{"suid"}}}}, "\"suid\" is not allowed"},
	} {
		c := bad.cfg
		c.Metadata, c.Image, c.Command = &runtimeapi.ContainerMetadata{Name: "bad"}, &runtimeapi.ImageSpec{Image: pulled.ImageRef}, []string{"/testinit", "echo", "escaped"}
		_, err := e.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: run.PodSandboxId, SandboxConfig: podCfg, Config: c})
		wantCRICode(t, "CreateContainer with "+bad.what, err, codes.InvalidArgument)
		if !strings.Contains(err.Error(), bad.want) {
			t.Errorf("CreateContainer with %s: %v, want it to say %q", bad.what, err, bad.want)
		}
	}
	if _, err := os.Stat(escape); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a log file was made out of the log directory: %s (%v)", escape, err)
	}
	// What kubelet sends is accepted: restricting mount options, its log
	// path, an FQDN hostname.
	ok := e.podConfig(t, "validate-ok")
	ok.Hostname = "web-0.web.e2e.svc.cluster.local"
	if _, err := e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: ok}); err != nil {
		t.Fatalf("RunPodSandbox with an FQDN hostname: %v", err)
	}
	c := &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "ok"}, Image: &runtimeapi.ImageSpec{Image: pulled.ImageRef},
		Command: []string{"/testinit", "sleep", "forever"}, LogPath: "ok/0.log",
		Mounts: []*runtimeapi.Mount{{ContainerPath: "/vol", HostPath: vol, MountOptions: []string{"noexec", "nodev", "nosuid"}}}}
	if _, err := e.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: run.PodSandboxId, SandboxConfig: podCfg, Config: c}); err != nil {
		t.Fatalf("CreateContainer as kubelet sends it: %v", err)
	}
	list, err := e.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(list.Items) != 2 {
		t.Fatalf("pods after the refusals: %v %v, want the two accepted", list.GetItems(), err)
	}
	if m := fixture.MountsUnder(t, filepath.Join(e.d.Dir, "root", "images")); len(m) != 1 {
		t.Fatalf("rootfs mounts %v, want the accepted container's alone", m)
	}
	e.removeAllPods()
}
