package server

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"

	"github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// What a CRI client may ask, checked before any work (a refused request
// changes nothing): every string that becomes a path, a line of a pod's
// file or a part of every List reply is bounded and checked here. Each
// error is InvalidArgument naming the field.

// Bounds of the maps every List reply echoes. Labels are bounded as the
// 0.2 API bounds its labels (api/server: 256 of them, 64 KiB counting 8
// bytes an entry besides its text); annotations by Kubernetes' own bound
// on a pod's (256 KiB: kubelet passes them through, and a smaller bound
// would refuse pods the API server accepts).
const (
	maxLabels          = 256
	maxLabelBytes      = 64 << 10
	maxAnnotationBytes = 256 << 10
	entryOverhead      = 8
	// maxNameBytes bounds the metadata's names (a DNS subdomain's 253).
	maxNameBytes = 253
	// maxHostnameBytes is the kernel's bound on a hostname.
	maxHostnameBytes = 64
)

// allowedMountOptions are the mount_options the CRI describes (further
// restrictions of a bind mount: noexec, nodev, nosuid) and the others
// that only restrict it. Anything else (rw, suid, dev, exec, a
// propagation) would undo what the daemon decides.
var allowedMountOptions = map[string]bool{
	"noexec": true, "nodev": true, "nosuid": true, "ro": true, "noatime": true, "nodiratime": true, "relatime": true,
}

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%s: %s: %w", field, fmt.Sprintf(format, args...), errdefs.ErrInvalidArgument)
}

// validateSandboxConfig checks a RunPodSandbox request's config.
func validateSandboxConfig(cfg *runtimeapi.PodSandboxConfig) error {
	md := cfg.GetMetadata()
	for _, f := range []struct{ name, v string }{{"name", md.GetName()}, {"namespace", md.GetNamespace()}, {"uid", md.GetUid()}} {
		if err := checkName("sandbox config: metadata."+f.name, f.v); err != nil {
			return err
		}
	}
	if err := checkHostname(cfg.GetHostname()); err != nil {
		return err
	}
	if err := checkLogDirectory(cfg.GetLogDirectory()); err != nil {
		return err
	}
	if err := checkDNS(cfg.GetDnsConfig()); err != nil {
		return err
	}
	return checkMaps("sandbox config", cfg.GetLabels(), cfg.GetAnnotations())
}

// validateContainerConfig checks a CreateContainer request's config; sb is
// the sandbox config its log path is under.
func validateContainerConfig(cfg *runtimeapi.ContainerConfig, sb *runtimeapi.PodSandboxConfig) error {
	if err := checkName("container config: metadata.name", cfg.GetMetadata().GetName()); err != nil {
		return err
	}
	if err := checkLogDirectory(sb.GetLogDirectory()); err != nil {
		return err
	}
	if err := checkLogPath(cfg.GetLogPath()); err != nil {
		return err
	}
	for i, m := range cfg.GetMounts() {
		for _, o := range m.GetMountOptions() {
			if !allowedMountOptions[o] {
				return invalid(fmt.Sprintf("container config: mount[%d] (%s) mount_options", i, m.GetContainerPath()),
					"%q is not allowed (only noexec, nodev, nosuid, ro, noatime, nodiratime, relatime restrict a mount)", o)
			}
		}
	}
	return checkMaps("container config", cfg.GetLabels(), cfg.GetAnnotations())
}

// checkName bounds a metadata name: it is in every List reply and in the
// labels of the 0.2 API's containers.
func checkName(field, v string) error {
	if len(v) > maxNameBytes {
		return invalid(field, "%d bytes, more than %d", len(v), maxNameBytes)
	}
	if i := strings.IndexFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }); i >= 0 {
		return invalid(field, "%q has a control character", v)
	}
	return nil
}

// checkHostname accepts an RFC 1123 host name (dot-separated labels of
// letters, digits and inner hyphens, each 1-63 bytes) of at most 64 bytes,
// with or without the root's final dot, or none (the node's). It is written
// into the pod's /etc/hosts and /etc/hostname: a newline there would add
// lines of the client's. The final dot is kubelet's: a pod with
// setHostnameAsFQDN gets "<name>.<subdomain>.<namespace>.svc.<cluster
// domain>", and with kubelet's default (no clusterDomain) that ends in
// "svc." (containerd passes it on; the kernel takes it).
func checkHostname(h string) error {
	const field = "sandbox config: hostname"
	if h == "" {
		return nil
	}
	if len(h) > maxHostnameBytes {
		return invalid(field, "%d bytes, more than the kernel's %d", len(h), maxHostnameBytes)
	}
	name := strings.TrimSuffix(h, ".")
	for _, label := range strings.Split(name, ".") {
		if !rfc1123Label(label) {
			return invalid(field, "%q is not an RFC 1123 host name (label %q)", h, label)
		}
	}
	return nil
}

func rfc1123Label(l string) bool {
	if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for _, c := range []byte(l) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// checkLogDirectory wants an absolute path (a relative one would be made
// relative to the daemon's working directory), or none.
func checkLogDirectory(dir string) error {
	if dir != "" && (!filepath.IsAbs(dir) || strings.ContainsRune(dir, 0)) {
		return invalid("sandbox config: log_directory", "%q is not an absolute path", dir)
	}
	return nil
}

// checkLogPath wants a path relative to the pod's log directory that stays
// in it: no absolute path, no ".." leaving it.
func checkLogPath(p string) error {
	if p == "" {
		return nil
	}
	clean := filepath.Clean(p)
	if filepath.IsAbs(p) || clean == ".." || strings.HasPrefix(clean, "../") || clean == "." || strings.ContainsRune(p, 0) {
		return invalid("container config: log_path", "%q leaves the pod's log_directory (it must be a relative path under it)", p)
	}
	return nil
}

// checkDNS: each value is a word of a line of the pod's resolv.conf; the
// servers are IP addresses.
func checkDNS(dns *runtimeapi.DNSConfig) error {
	for i, s := range dns.GetServers() {
		if _, err := netip.ParseAddr(s); err != nil {
			return invalid(fmt.Sprintf("sandbox config: dns_config.servers[%d]", i), "%q is not an IP address", s)
		}
	}
	for field, vs := range map[string][]string{"searches": dns.GetSearches(), "options": dns.GetOptions()} {
		for i, v := range vs {
			if v == "" || len(v) > maxNameBytes || strings.IndexFunc(v, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
				return invalid(fmt.Sprintf("sandbox config: dns_config.%s[%d]", field, i), "%q: want 1-%d bytes without spaces or control characters", v, maxNameBytes)
			}
		}
	}
	return nil
}

// checkMaps bounds labels and annotations.
func checkMaps(scope string, labels, annotations map[string]string) error {
	if len(labels) > maxLabels {
		return invalid(scope+": labels", "%d of them, more than the %d allowed", len(labels), maxLabels)
	}
	if n := mapBytes(labels); n > maxLabelBytes {
		return invalid(scope+": labels", "%d bytes in all (counting %d an entry), more than the %d allowed", n, entryOverhead, maxLabelBytes)
	}
	if n := mapBytes(annotations); n > maxAnnotationBytes {
		return invalid(scope+": annotations", "%d bytes in all (counting %d an entry), more than the %d allowed", n, entryOverhead, maxAnnotationBytes)
	}
	return nil
}

func mapBytes(m map[string]string) int {
	n := 0
	for k, v := range m {
		n += len(k) + len(v) + entryOverhead
	}
	return n
}
