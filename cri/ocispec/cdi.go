package ocispec

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/internal/errmark"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
	"tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
)

// DefaultCDISpecDirs are where CDI specs are looked for when the daemon is
// not told otherwise: the static and the generated ones, lowest priority
// first, as containerd and the CDI library have them.
var DefaultCDISpecDirs = []string{cdi.DefaultStaticDir, cdi.DefaultDynamicDir}

// CDI resolves Container Device Interface devices ("vendor.com/class=name")
// through the CDI specs (JSON or YAML files) in a list of dirs, a later dir
// taking precedence over an earlier one for a device both define, and
// edits a container's spec as each device's spec says: device nodes (and
// the device cgroup rules that let them be opened), environment
// variables, mounts, hooks, additional groups.
//
// The dirs are scanned again at each container that asks for a device, not
// watched: a driver that writes a spec just before the container's create
// (dynamic resource allocation) is seen, and a daemon whose containers
// name no device never reads them. A CDI is safe for concurrent use.
type CDI struct {
	dirs  []string
	cache *cdi.Cache
}

// NewCDI resolves devices through the specs in dirs (DefaultCDISpecDirs
// when empty). A dir that does not exist is not an error: it may appear.
func NewCDI(dirs []string) *CDI {
	if len(dirs) == 0 {
		dirs = DefaultCDISpecDirs
	}
	dirs = slices.Clone(dirs)
	// NewCache's error is always nil (kept for its API); a watch is not
	// wanted (see CDI).
	cache, _ := cdi.NewCache(cdi.WithSpecDirs(dirs...), cdi.WithAutoRefresh(false))
	return &CDI{dirs: dirs, cache: cache}
}

// SpecDirs are the dirs the specs are read from, lowest priority first.
func (c *CDI) SpecDirs() []string { return slices.Clone(c.dirs) }

// CDIAnnotationPrefix starts the annotations through which a device
// plugin (kubelet passes its allocation's annotations on to the
// container's config) asks for CDI devices: a key of this prefix, a value
// of comma-separated fully qualified device names.
const CDIAnnotationPrefix = cdi.AnnotationPrefix

// CDIDevices are the CDI devices a container's config asks for: its
// cdi_devices, then those its cdi.k8s.io/ annotations name (in the order of
// their keys), each once. Only the container's own annotations count, as in
// containerd and CRI-O: a pod's annotations would hand the device to every
// container of the pod. A name that is not a fully qualified CDI device name
// is InvalidArgument naming the field.
func CDIDevices(cfg *runtime.ContainerConfig) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	add := func(field, name string) error {
		if _, _, _, err := parser.ParseQualifiedName(name); err != nil {
			return fieldErrorf(containerScope, field, "CDI device %q: %v", name, err)
		}
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
		return nil
	}
	for i, d := range cfg.GetCDIDevices() {
		if err := add(fmt.Sprintf("cdi_devices[%d]", i), d.GetName()); err != nil {
			return nil, err
		}
	}
	ann := cfg.GetAnnotations()
	for _, k := range slices.Sorted(maps.Keys(ann)) {
		if !strings.HasPrefix(k, CDIAnnotationPrefix) {
			continue
		}
		for name := range strings.SplitSeq(ann[k], ",") {
			if err := add(fmt.Sprintf("annotations[%s]", k), strings.TrimSpace(name)); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// Check resolves devices without a container: what Inject would refuse
// for a spec, Check refuses, so that a create can be refused before it
// makes anything. (Inject may still fail after it if a spec changes in
// between.)
func (c *CDI) Check(devices []string) error {
	if len(devices) == 0 {
		return nil
	}
	return c.Inject(&specs.Spec{Process: &specs.Process{}, Linux: &specs.Linux{}}, devices)
}

// Inject edits spec as the devices' CDI specs say. A device no spec
// defines is NotFound naming it and the dirs (with the errors of the specs
// that could not be read, which may be why); edits that cannot be made (a
// device node whose host path is gone, an invalid spec) are
// InvalidArgument naming the devices.
func (c *CDI) Inject(spec *specs.Spec, devices []string) error {
	if len(devices) == 0 {
		return nil
	}
	// Refresh's error is about some spec file that does not load; a device
	// of another spec must not fail for it (containerd's choice too). It is
	// told when a device is not found.
	loadErr := c.cache.Refresh()
	var missing []string
	for _, d := range devices {
		if c.cache.GetDevice(d) == nil {
			missing = append(missing, d)
		}
	}
	if len(missing) > 0 {
		err := fmt.Errorf("%s: CDI device %s: not found in the CDI specs of %s", containerScope,
			strings.Join(quoteAll(missing), ", "), strings.Join(c.dirs, ", "))
		if loadErr != nil {
			err = fmt.Errorf("%w (specs that did not load: %s)", err, oneLine(specErrors(c.cache)))
		}
		return errmark.Mark(err, errdefs.ErrNotFound)
	}
	if _, err := c.cache.InjectDevices(spec, devices...); err != nil {
		return fieldErrorf(containerScope, "CDI devices "+strings.Join(quoteAll(devices), ", "), "%v", err)
	}
	return nil
}

// specErrors says which spec files failed to load and why, sorted.
func specErrors(cache *cdi.Cache) error {
	all := cache.GetErrors()
	var errs []error
	for _, path := range slices.Sorted(maps.Keys(all)) {
		errs = append(errs, fmt.Errorf("%s: %w", filepath.Clean(path), errors.Join(all[path]...)))
	}
	return errors.Join(errs...)
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}
