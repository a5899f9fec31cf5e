package server

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func bigMap(n, size int) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[strings.Repeat("k", 8)+string(rune('a'+i%26))+strings.Repeat("0", i/26)] = strings.Repeat("v", size)
	}
	return m
}

func TestValidateSandboxConfig(t *testing.T) {
	for _, tt := range []struct {
		name string
		bend func(*runtimeapi.PodSandboxConfig)
		want string // "" for valid
	}{
		{"kubelet's", func(*runtimeapi.PodSandboxConfig) {}, ""},
		{"FQDN hostname", func(c *runtimeapi.PodSandboxConfig) { c.Hostname = "web-0.web.default.svc.cluster.local" }, ""},
		{"FQDN hostname with the root's dot (kubelet's, no cluster domain)", func(c *runtimeapi.PodSandboxConfig) { c.Hostname = "web-0.web.default.svc." }, ""},
		{"hostname of the root's dot alone", func(c *runtimeapi.PodSandboxConfig) { c.Hostname = "." }, "not an RFC 1123 host name"},
		{"hostname with two final dots", func(c *runtimeapi.PodSandboxConfig) { c.Hostname = "a.." }, "not an RFC 1123 host name"},
		{"no hostname", func(c *runtimeapi.PodSandboxConfig) { c.Hostname = "" }, ""},
		{"hostname with a newline", func(c *runtimeapi.PodSandboxConfig) { c.Hostname = "a\n10.0.0.1 evil" }, "sandbox config: hostname: \"a\\n10.0.0.1 evil\" is not an RFC 1123 host name"},
		{"hostname of 300 bytes", func(c *runtimeapi.PodSandboxConfig) { c.Hostname = strings.Repeat("a", 300) }, "sandbox config: hostname: 300 bytes, more than the kernel's 64"},
		{"hostname with a leading hyphen", func(c *runtimeapi.PodSandboxConfig) { c.Hostname = "-a" }, "not an RFC 1123 host name"},
		{"hostname with an empty label", func(c *runtimeapi.PodSandboxConfig) { c.Hostname = "a..b" }, "not an RFC 1123 host name"},
		{"relative log_directory", func(c *runtimeapi.PodSandboxConfig) { c.LogDirectory = "logs/pod" }, "sandbox config: log_directory: \"logs/pod\" is not an absolute path"},
		{"long name", func(c *runtimeapi.PodSandboxConfig) { c.Metadata.Name = strings.Repeat("n", 254) }, "metadata.name: 254 bytes, more than 253"},
		{"namespace with a newline", func(c *runtimeapi.PodSandboxConfig) { c.Metadata.Namespace = "a\nb" }, "metadata.namespace: \"a\\nb\" has a control character"},
		{"DNS server not an IP", func(c *runtimeapi.PodSandboxConfig) {
			c.DnsConfig = &runtimeapi.DNSConfig{Servers: []string{"10.0.0.10\nnameserver 6.6.6.6"}}
		}, "dns_config.servers[0]"},
		{"DNS search with a newline", func(c *runtimeapi.PodSandboxConfig) {
			c.DnsConfig = &runtimeapi.DNSConfig{Servers: []string{"10.0.0.10", "fd00::a"}, Searches: []string{"svc.cluster.local\noptions x"}}
		}, "dns_config.searches[0]"},
		{"DNS as kubelet sends it", func(c *runtimeapi.PodSandboxConfig) {
			c.DnsConfig = &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: []string{"default.svc.cluster.local", "svc.cluster.local"}, Options: []string{"ndots:5"}}
		}, ""},
		{"257 labels", func(c *runtimeapi.PodSandboxConfig) { c.Labels = bigMap(257, 1) }, "sandbox config: labels: 257 of them, more than the 256 allowed"},
		{"labels of 70 KiB", func(c *runtimeapi.PodSandboxConfig) { c.Labels = bigMap(10, 7<<10) }, "sandbox config: labels: "},
		{"annotations of 200 KiB", func(c *runtimeapi.PodSandboxConfig) { c.Annotations = bigMap(50, 4<<10) }, ""},
		{"annotations of 4 MiB", func(c *runtimeapi.PodSandboxConfig) { c.Annotations = bigMap(4, 1<<20) }, "sandbox config: annotations: "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := podConfig("p")
			cfg.Hostname = "p"
			tt.bend(cfg)
			wantInvalid(t, validateSandboxConfig(cfg), tt.want)
		})
	}
}

func TestValidateContainerConfig(t *testing.T) {
	for _, tt := range []struct {
		name string
		bend func(*runtimeapi.ContainerConfig, *runtimeapi.PodSandboxConfig)
		want string
	}{
		{"kubelet's", func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) { c.LogPath = "c/0.log" }, ""},
		{"dot-dots inside", func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) { c.LogPath = "c/../d/0.log" }, ""},
		{"log_path leaving", func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) {
			c.LogPath = "../../../etc/cron.d/x"
		},
			"container config: log_path: \"../../../etc/cron.d/x\" leaves the pod's log_directory"},
		{"log_path absolute", func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) { c.LogPath = "/etc/x" }, "leaves the pod's log_directory"},
		{"log_path the dir itself", func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) { c.LogPath = "a/.." }, "leaves the pod's log_directory"},
		{"relative log_directory", func(c *runtimeapi.ContainerConfig, sb *runtimeapi.PodSandboxConfig) {
			c.LogPath = "0.log"
			sb.LogDirectory = "rel"
		},
			"log_directory: \"rel\" is not an absolute path"},
		{"restricting mount options", func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) {
			c.Mounts = []*runtimeapi.Mount{{ContainerPath: "/d", HostPath: "/tmp", MountOptions: []string{"noexec", "nodev", "nosuid", "ro"}}}
		}, ""},
		{"rw over read-only", func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) {
			c.Mounts = []*runtimeapi.Mount{{ContainerPath: "/ok", HostPath: "/tmp"}, {ContainerPath: "/d", HostPath: "/tmp", Readonly: true, MountOptions: []string{"rw"}}}
		}, "container config: mount[1] (/d) mount_options: \"rw\" is not allowed"},
		{"suid", func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) {
			c.Mounts = []*runtimeapi.Mount{{ContainerPath: "/d", HostPath: "/tmp", MountOptions: []string{"suid"}}}
		}, "\"suid\" is not allowed"},
		{"dev", func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) {
			c.Mounts = []*runtimeapi.Mount{{ContainerPath: "/d", HostPath: "/tmp", MountOptions: []string{"dev"}}}
		}, "\"dev\" is not allowed"},
		{"propagation", func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) {
			c.Mounts = []*runtimeapi.Mount{{ContainerPath: "/d", HostPath: "/tmp", MountOptions: []string{"rshared"}}}
		}, "\"rshared\" is not allowed"},
		{"name with a newline", func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) { c.Metadata.Name = "a\nb" }, "metadata.name"},
		{"annotations of 4 MiB", func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) { c.Annotations = bigMap(4, 1<<20) }, "container config: annotations: "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, sb := ctrConfig("c"), podConfig("p")
			tt.bend(cfg, sb)
			wantInvalid(t, validateContainerConfig(cfg, sb), tt.want)
		})
	}
}

func wantInvalid(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("refused: %v", err)
	case want == "":
	case status.Code(toStatus(err)) != codes.InvalidArgument || !strings.Contains(err.Error(), want):
		t.Fatalf("%v, want InvalidArgument saying %q", err, want)
	}
}

// TestRefusedConfigsLeaveNothing: a refused RunPodSandbox or
// CreateContainer made nothing: no object, no dir, no network.
func TestRefusedConfigsLeaveNothing(t *testing.T) {
	e := newEnv(t)
	bad := podConfig("bad")
	bad.Hostname = "x\n1.2.3.4 kubernetes.default"
	_, err := e.srv.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: bad})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("RunPodSandbox with a newline in the hostname: %v", err)
	}
	pod := e.runPod("good")
	cfg := ctrConfig("c")
	cfg.LogPath = "../../x.log"
	_, err = e.srv.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: cfg})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("CreateContainer with a log path out of the log dir: %v", err)
	}
	pods, ctrs := e.listed()
	if len(pods) != 1 || len(ctrs) != 0 || len(e.dirs("sandboxes")) != 1 || len(e.dirs("containers")) != 0 {
		t.Fatalf("after the refusals: pods %v containers %v dirs %v %v", pods, ctrs, e.dirs("sandboxes"), e.dirs("containers"))
	}
}
