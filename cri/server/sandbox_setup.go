package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/cri/ocispec"
	"github.com/evjournal/containerd/image"
	"github.com/evjournal/containerd/internal/crashpoint"
	"github.com/evjournal/containerd/podnet"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// What RunPodSandbox sets up beside the pause process: the network, the
// pod's /dev/shm and files, the bundle, the rootfs of a --sandbox-image.

var errNoNetwork = fmt.Errorf("pod network: no CNI network is configured (only host-network pods can run): %w", errdefs.ErrFailedPrecondition)

// setupNetwork pins the pod's network namespace (a new one, or with
// pausePid the one the pause process made) and plugs it into the CNI
// network. The undo (CNI DEL, then the pin's removal) is registered before
// the pin is made: a setup cut short anywhere is undone whole.
func (s *Server) setupNetwork(ctx context.Context, id string, cfg *runtimeapi.PodSandboxConfig, pausePid int, undo *undoList) ([]string, error) {
	if s.cfg.Network == nil {
		return nil, errNoNetwork
	}
	path := s.netnsPath(id)
	undo.add("tear the pod network down", func(ctx context.Context) error { return s.teardownNetwork(ctx, id, path) })
	var err error
	if pausePid > 0 {
		err = s.host.PinNetNS(filepath.Dir(path), id, pausePid)
	} else {
		err = s.host.NewNetNS(filepath.Dir(path), id)
	}
	if err != nil {
		return nil, fmt.Errorf("pod network namespace: %w", err)
	}
	crashpoint.At("run-pod:after-netns")
	res, err := s.cfg.Network.Setup(ctx, id, path, networkOptions(cfg))
	if err != nil {
		return nil, fmt.Errorf("pod network: %w", err)
	}
	var ips []string
	for _, ip := range res.IPs {
		ips = append(ips, ip.String())
	}
	crashpoint.At("run-pod:after-cni-add")
	return ips, nil
}

func networkOptions(cfg *runtimeapi.PodSandboxConfig) podnet.SetupOptions {
	md := cfg.GetMetadata()
	opts := podnet.SetupOptions{Namespace: md.GetNamespace(), Name: md.GetName(), UID: md.GetUid(), Annotations: cfg.GetAnnotations()}
	for _, pm := range cfg.GetPortMappings() {
		opts.PortMappings = append(opts.PortMappings, podnet.PortMapping{
			HostPort: pm.GetHostPort(), ContainerPort: pm.GetContainerPort(), Protocol: pm.GetProtocol().String(), HostIP: pm.GetHostIp(),
		})
	}
	return opts
}

// netnsPath and shmPath are where a pod's pinned network namespace and
// /dev/shm are: derived from the id, so that what a crash left is found.
func (s *Server) netnsPath(id string) string { return filepath.Join(s.cfg.StateDir, "netns", id) }
func (s *Server) shmPath(id string) string   { return filepath.Join(s.cfg.StateDir, "shm", id) }

// pauseMount binds the host's pause binary into a pod's empty rootfs.
func pauseMount(pause string) specs.Mount {
	return specs.Mount{Destination: pauseInRootfs, Type: "bind", Source: pause, Options: []string{"rbind", "ro"}}
}

func sandboxLabels(cfg *runtimeapi.PodSandboxConfig) []string {
	md := cfg.GetMetadata()
	return []string{"io.kubernetes.cri.kind=sandbox", "io.kubernetes.pod.name=" + md.GetName(), "io.kubernetes.pod.namespace=" + md.GetNamespace()}
}

// mountShm mounts a pod's /dev/shm: a tmpfs on the host that the sandbox and
// its containers bind.
func mountShm(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := unix.Mount("shm", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, fmt.Sprintf("mode=1777,size=%d", podShmSize)); err != nil {
		os.Remove(dir)
		return "", fmt.Errorf("mount the pod's /dev/shm at %s: %w", dir, err)
	}
	return dir, nil
}

func unmountShm(dir string) error {
	if dir == "" {
		return nil
	}
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

type podFiles struct{ hostname, resolvConf, hosts string }

// writePodFiles writes the pod's /etc/hostname, /etc/resolv.conf (from the
// config's DNS settings, else the host's) and /etc/hosts. A pod on the
// host's network has the host's name (it shares the host's UTS namespace):
// its /etc/hostname says so whatever the config's hostname, which such a
// pod cannot have (kubelet sends none; containerd's runc refuses the pod).
func writePodFiles(dir string, cfg *runtimeapi.PodSandboxConfig, ips []string) (podFiles, error) {
	f := podFiles{hostname: filepath.Join(dir, "hostname"), resolvConf: filepath.Join(dir, "resolv.conf"), hosts: filepath.Join(dir, "hosts")}
	hostname := cfg.GetHostname()
	if hostname == "" || cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE {
		hostname, _ = os.Hostname()
	}
	hosts := "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
	if len(ips) > 0 {
		hosts += ips[0] + "\t" + hostname + "\n"
	}
	resolv, err := resolvConf(cfg.GetDnsConfig())
	if err != nil {
		return f, err
	}
	for _, w := range []struct{ path, data string }{{f.hostname, hostname + "\n"}, {f.resolvConf, resolv}, {f.hosts, hosts}} {
		if err := os.WriteFile(w.path, []byte(w.data), 0o644); err != nil {
			return f, err
		}
	}
	return f, nil
}

func resolvConf(dns *runtimeapi.DNSConfig) (string, error) {
	if dns == nil || (len(dns.GetServers()) == 0 && len(dns.GetSearches()) == 0 && len(dns.GetOptions()) == 0) {
		data, err := os.ReadFile("/etc/resolv.conf")
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil
		}
		return string(data), err
	}
	var b strings.Builder
	for _, s := range dns.GetServers() {
		b.WriteString("nameserver " + s + "\n")
	}
	if len(dns.GetSearches()) > 0 {
		b.WriteString("search " + strings.Join(dns.GetSearches(), " ") + "\n")
	}
	if len(dns.GetOptions()) > 0 {
		b.WriteString("options " + strings.Join(dns.GetOptions(), " ") + "\n")
	}
	return b.String(), nil
}

func writeBundle(dir string, spec *specs.Spec) error {
	data, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.json"), data, 0o600)
}

// sandboxImageRootfs prepares the sandbox's rootfs from --sandbox-image,
// pulling the image the first time (through the configured mirrors), and
// returns it with the process's argv (the image's entrypoint and cmd).
// With a user namespace the rootfs's upper dir belongs to the pod's root,
// so that runc can make the mountpoints the image lacks from inside; the
// image's own files are not id-mapped (the namespace does not exist yet).
func (s *Server) sandboxImageRootfs(ctx context.Context, id string, userNS *ocispec.UserNS) (string, []string, error) {
	ref := s.cfg.SandboxImage
	img, err := s.cfg.Images.Get(ref)
	if errdefs.IsNotFound(err) {
		s.log.WithField("image", ref).Info("cri: pulling the sandbox image")
		img, err = s.cfg.Images.Pull(ctx, ref, nil)
	}
	if err != nil {
		return "", nil, fmt.Errorf("sandbox image %s (--sandbox-image): %w", ref, err)
	}
	args := append(slices.Clone(img.Config.Entrypoint), img.Config.Cmd...)
	if len(args) == 0 {
		return "", nil, fmt.Errorf("sandbox image %s (--sandbox-image) has neither entrypoint nor cmd: %w", ref, errdefs.ErrFailedPrecondition)
	}
	var owner []image.IDMap
	if userNS != nil {
		owner = append(owner, image.IDMap{RootUID: userNS.HostRootUID(), RootGID: userNS.HostRootGID()})
	}
	rootfs, err := s.cfg.Images.PrepareRootfs(id, img.ID, owner...)
	if err != nil {
		return "", nil, fmt.Errorf("sandbox image %s: rootfs: %w", ref, err)
	}
	return rootfs, args, nil
}
