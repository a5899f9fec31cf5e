package server

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/supervisor"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/opencontainers/runtime-spec/specs-go/features"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Runtime handlers (Kubernetes' RuntimeClass): each names an OCI runtime
// binary and its global args. A pod runs through its handler's runtime:
// its pause process and every container and exec of it (the runtime layer
// records the runtime of each container, and its execs, updates, kills and
// deletes use that one, also after a restart). The default handler, "",
// is the daemon's --runtime with --runtime-args.

// RuntimeHandler is one configured handler.
type RuntimeHandler struct {
	// Name is what RunPodSandboxRequest.runtime_handler names (an RFC 1123
	// label, as a RuntimeClass's handler); "" is the default.
	Name string
	// Runtime is the OCI runtime binary (a path, or a name found on PATH
	// at each use); Args its global args, before every subcommand (e.g.
	// --root DIR: two runtimes must not share a state dir).
	Runtime string
	Args    []string
}

// handlerSet is the handlers the service serves, the default first, with
// the features each was found to have at start.
type handlerSet struct {
	list     []RuntimeHandler
	features map[string]*runtimeapi.RuntimeHandlerFeatures
}

// legacyDefaultName is accepted as the default handler's name when no
// handler of that name is configured: earlier versions served "runc" so.
const legacyDefaultName = "runc"

// newHandlerSet probes each handler's features (`<runtime> [args] features`,
// bounded; a runtime without that command is taken to have none of them).
func newHandlerSet(def RuntimeHandler, extra []RuntimeHandler, log *logrus.Entry) (*handlerSet, error) {
	def.Name = ""
	hs := &handlerSet{list: append([]RuntimeHandler{def}, extra...), features: map[string]*runtimeapi.RuntimeHandlerFeatures{}}
	for i, h := range hs.list {
		if i > 0 && h.Name == "" {
			return nil, fmt.Errorf("cri: a runtime handler without a name (the default is --runtime)")
		}
		if slices.IndexFunc(hs.list[:i], func(o RuntimeHandler) bool { return o.Name == h.Name }) >= 0 {
			return nil, fmt.Errorf("cri: runtime handler %q configured twice", h.Name)
		}
		f, err := probeHandlerFeatures(h)
		if err != nil {
			log.WithError(err).WithField("handler", h.Name).Info("cri: the runtime handler's features cannot be read: " +
				"neither recursive read-only mounts nor user namespaces are advertised for it")
		}
		hs.features[h.Name] = f
	}
	return hs, nil
}

// lookup finds a pod's handler by name: unknown is NotFound, as containerd
// answers kubelet for a RuntimeClass the node does not have.
func (hs *handlerSet) lookup(name string) (RuntimeHandler, error) {
	for _, h := range hs.list {
		if h.Name == name {
			return h, nil
		}
	}
	if name == legacyDefaultName {
		return hs.list[0], nil
	}
	return RuntimeHandler{}, fmt.Errorf("runtime handler %q is not configured (configured: %s): %w", name, hs.names(), errdefs.ErrNotFound)
}

func (hs *handlerSet) names() string {
	var n []string
	for _, h := range hs.list {
		n = append(n, fmt.Sprintf("%q", h.Name))
	}
	return strings.Join(n, ", ")
}

// status is Status's list: every handler with its features.
func (hs *handlerSet) status() []*runtimeapi.RuntimeHandler {
	out := make([]*runtimeapi.RuntimeHandler, 0, len(hs.list))
	for _, h := range hs.list {
		out = append(out, &runtimeapi.RuntimeHandler{Name: h.Name, Features: hs.features[h.Name]})
	}
	return out
}

// canUserNS says whether pods of this handler may have a user namespace.
func (hs *handlerSet) canUserNS(name string) bool {
	return hs.features[name].GetUserNamespaces()
}

// featuresTimeout bounds one `<runtime> features`.
const featuresTimeout = 10 * time.Second

// probeHandlerFeatures asks the runtime what it supports (the OCI features
// document, `runc features`, since runc 1.1): recursive read-only mounts
// need its "rro" mount option (and mount_setattr, Linux 5.12); user
// namespaces as Kubernetes uses them need the user namespace and idmapped
// mounts. A variable for the unit tests.
var probeHandlerFeatures = func(h RuntimeHandler) (*runtimeapi.RuntimeHandlerFeatures, error) {
	none := &runtimeapi.RuntimeHandlerFeatures{}
	ctx, cancel := context.WithTimeout(context.Background(), featuresTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, h.Runtime, append(slices.Clone(h.Args), "features")...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			err = fmt.Errorf("%s features: %w: %s", h.Runtime, err, strings.TrimSpace(string(ee.Stderr)))
		} else {
			err = fmt.Errorf("%s features: %w", h.Runtime, err)
		}
		return none, err
	}
	return handlerFeaturesFrom(out)
}

// handlerFeaturesFrom reads an OCI features document.
func handlerFeaturesFrom(doc []byte) (*runtimeapi.RuntimeHandlerFeatures, error) {
	var f features.Features
	if err := json.Unmarshal(doc, &f); err != nil {
		return &runtimeapi.RuntimeHandlerFeatures{}, fmt.Errorf("the runtime's features document: %w", err)
	}
	out := &runtimeapi.RuntimeHandlerFeatures{
		RecursiveReadOnlyMounts: slices.Contains(f.MountOptions, "rro") && mountSetattrKernel(),
	}
	if l := f.Linux; l != nil {
		idmap := l.MountExtensions != nil && l.MountExtensions.IDMap != nil && l.MountExtensions.IDMap.Enabled != nil && *l.MountExtensions.IDMap.Enabled
		out.UserNamespaces = slices.Contains(l.Namespaces, "user") && idmap
	}
	return out, nil
}

// mountSetattrKernel says whether the kernel has mount_setattr (Linux
// 5.12), which runc's "rro" needs: a call that changes nothing succeeds
// (or fails on its fd) there, and fails with ENOSYS before.
func mountSetattrKernel() bool {
	err := unix.MountSetattr(-1, "", 0, &unix.MountAttr{})
	return err != unix.ENOSYS
}

// podHandler is the handler a RunPodSandbox names, refused when unknown
// (NotFound) or when the pod asks for a user namespace its runtime cannot
// give (kubelet does not send such a pod to a handler that does not
// advertise the feature; another client is told why).
func (s *Server) podHandler(name string, cfg *runtimeapi.PodSandboxConfig) (RuntimeHandler, error) {
	h, err := s.handlers.lookup(name)
	if err != nil {
		return h, err
	}
	// POD is the enum's zero value: only options that are there ask.
	u := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions()
	if u != nil && u.GetMode() == runtimeapi.NamespaceMode_POD && !s.handlers.canUserNS(h.Name) {
		return h, fmt.Errorf("runtime handler %q does not support user namespaces (its runtime %s has no idmapped mounts, or says nothing of them): %w",
			h.Name, h.Runtime, errdefs.ErrInvalidArgument)
	}
	return h, nil
}

// handlerOf is the handler a pod was made with, as configured now: one
// the daemon no longer has (restarted without it) is FailedPrecondition,
// as the pod's new containers would run elsewhere than its pause.
func (s *Server) handlerOf(sb *sandbox) (RuntimeHandler, error) {
	h, err := s.handlers.lookup(sb.rec.RuntimeHandler)
	if errdefs.IsNotFound(err) {
		return h, fmt.Errorf("pod sandbox %s: %v: %w", sb.rec.ID, err, errdefs.ErrFailedPrecondition)
	}
	return h, err
}

// request names the handler's runtime in a create: the default handler
// leaves the supervisor's own (--runtime, --runtime-args).
func (h RuntimeHandler) request(r supervisor.CreateRequest) supervisor.CreateRequest {
	if h.Name != "" {
		// The supervisor's rule: a runtime named brings its own args.
		r.Runtime, r.RuntimeArgs = h.Runtime, slices.Clone(h.Args)
	}
	return r
}

// specVersion is the ociVersion a bundle for this handler's runtime
// carries: the version of the specs the daemon writes, unless the runtime
// says (`--version`'s "spec:" line) that it reads an older 1.x, whose
// number it is then given. crun before 1.9 refuses every ociVersion but
// 1.0.x ("unknown version specified") although it reads what a 1.0 spec
// holds, and what it does not know of a newer one it ignores, as any
// runtime does with a field of a later spec.
func (h RuntimeHandler) specVersion() string {
	theirs := runtime.RuntimeFeatures(h.Runtime).Spec
	if theirs == "" || !olderMinor(theirs, specs.Version) {
		return specs.Version
	}
	return theirs
}

// olderMinor says whether spec version a is of b's major version and an
// older minor one ("1.0.2-dev" against "1.3.0").
func olderMinor(a, b string) bool {
	am, an, aok := majorMinor(a)
	bm, bn, bok := majorMinor(b)
	return aok && bok && am == bm && an < bn
}

func majorMinor(v string) (major, minor int, ok bool) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	return major, minor, err1 == nil && err2 == nil
}
