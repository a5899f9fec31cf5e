package harness

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"sync"

	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/specs"
)

// Env is one run's private directory and everything started in it. Close
// undoes it all in reverse order, then kills any process still referring
// to the directory (shims, runc, containers) and removes it.
type Env struct {
	Bins Bins
	Dir  string
	// Tag prefixes every container id of the run (see ID): runc names
	// cgroups after ids, and other runs on the machine must not collide.
	Tag string

	mu       sync.Mutex
	cleanups []func()
	closed   bool
	// closeDone is closed when the first Close has finished.
	closeDone chan struct{}
	// nets counts the CNI networks of the run (NewCNINet); subnets holds
	// their /24s, so that no two share one.
	nets    int
	subnets map[string]bool
}

// NewEnv makes a fresh directory under parent ("" = os.TempDir()).
func NewEnv(parent, prefix string) (*Env, error) {
	bins, err := FindBins()
	if err != nil {
		return nil, err
	}
	if parent == "" {
		parent = os.TempDir()
	}
	dir, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		return nil, err
	}
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	return &Env{Bins: bins, Dir: dir, Tag: "b" + hex.EncodeToString(b[:])}, nil
}

// ID makes a container id unique to this run: "<tag>-<name>".
func (e *Env) ID(name string) string { return e.Tag + "-" + name }

// Defer registers f to run at Close (last registered, first run); after
// Close it runs f at once.
func (e *Env) Defer(f func()) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		f()
		return
	}
	defer e.mu.Unlock()
	e.cleanups = append(e.cleanups, f)
}

// Close runs the cleanups, kills leftovers and removes the directory. It
// returns the leftovers it had to kill (none after a clean run). A second
// Close (the run's end while a signal's cleanup is under way) waits for the
// first to finish and returns nothing.
func (e *Env) Close() []string {
	e.mu.Lock()
	if e.closed {
		done := e.closeDone
		e.mu.Unlock()
		<-done
		return nil
	}
	e.closed = true
	e.closeDone = make(chan struct{})
	defer close(e.closeDone)
	fs := e.cleanups
	e.cleanups = nil
	e.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
	leaks := fixture.Leaks(e.Dir)
	leaks = append(leaks, e.killTagged()...)
	os.RemoveAll(e.Dir)
	return leaks
}

// Path joins elems under the env's directory.
func (e *Env) Path(elem ...string) string {
	return filepath.Join(append([]string{e.Dir}, elem...)...)
}

// BundleOption changes the spec of a new bundle.
type BundleOption func(dir string, s *specs.Spec) error

// Args sets the test init's steps (see integration/testinit).
func Args(steps ...string) BundleOption {
	return func(_ string, s *specs.Spec) error {
		fixture.Args(steps...)(s)
		return nil
	}
}

// BindMount makes host dir src visible read-write at dst in the container.
func BindMount(src, dst string) BundleOption {
	return func(dir string, s *specs.Spec) error {
		if err := os.MkdirAll(filepath.Join(dir, "rootfs", dst), 0o755); err != nil {
			return err
		}
		s.Mounts = append(s.Mounts, specs.Mount{Destination: dst, Type: "bind", Source: src,
			Options: []string{"rbind", "rw"}})
		return nil
	}
}

// Bundle makes an OCI bundle at <env>/bundles/<name>: the default test spec
// of integration/fixture (the static test init, sleeping until killed) and a
// rootfs holding only /testinit. Many containers may share one bundle.
func (e *Env) Bundle(name string, opts ...BundleOption) (string, error) {
	dir := e.Path("bundles", name)
	if err := fixture.MakeRootfs(dir, e.Bins.Testinit); err != nil {
		return "", err
	}
	spec := fixture.DefaultSpec()
	for _, o := range opts {
		if err := o(dir, spec); err != nil {
			return "", err
		}
	}
	return dir, WriteSpec(dir, spec)
}

// WriteSpec writes spec as dir/config.json.
func WriteSpec(dir string, spec *specs.Spec) error { return fixture.WriteSpec(dir, spec) }

// SharedBundle makes <env>/bundles/<name> holding only a config.json whose
// root is rootfs (an absolute path, shared by many bundles): the cheap way
// to give every container its own arguments.
func (e *Env) SharedBundle(rootfs, name string, opts ...BundleOption) (string, error) {
	dir := e.Path("bundles", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	spec := fixture.DefaultSpec()
	spec.Root.Path = rootfs
	for _, o := range opts {
		if err := o(dir, spec); err != nil {
			return "", err
		}
	}
	return dir, WriteSpec(dir, spec)
}

// Mount adds a bind mount whose target already exists in the rootfs.
func Mount(src, dst string) BundleOption {
	return func(_ string, s *specs.Spec) error {
		s.Mounts = append(s.Mounts, specs.Mount{Destination: dst, Type: "bind", Source: src,
			Options: []string{"rbind", "rw"}})
		return nil
	}
}
