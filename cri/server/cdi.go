package server

import (
	"fmt"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/cri/ocispec"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// CDIDevices resolves Container Device Interface devices: *ocispec.CDI.
type CDIDevices interface {
	// Check refuses devices Inject would refuse, before anything is made.
	Check(devices []string) error
	// Inject edits a container's spec as the devices' CDI specs say.
	Inject(spec *specs.Spec, devices []string) error
	SpecDirs() []string
}

var _ CDIDevices = (*ocispec.CDI)(nil)

// cdiDevices are the CDI devices cfg asks for, checked against the spec
// dirs: a name that is not a CDI device name is InvalidArgument, one no
// spec defines NotFound, each naming the device; nothing is made before.
func (s *Server) cdiDevices(cfg *runtimeapi.ContainerConfig) ([]string, error) {
	devs, err := ocispec.CDIDevices(cfg)
	if err != nil || len(devs) == 0 {
		return nil, err
	}
	if s.cfg.CDI == nil {
		return nil, fmt.Errorf("container config: CDI device %q: CDI is not configured on this daemon: %w", devs[0], errdefs.ErrFailedPrecondition)
	}
	if err := s.cfg.CDI.Check(devs); err != nil {
		return nil, err
	}
	return devs, nil
}

// injectCDI edits a container's spec for the CDI devices its config asks
// for (checked by cdiDevices before the create began; a spec changed since
// fails here, and the create's undo removes what it made).
func (s *Server) injectCDI(spec *specs.Spec, cfg *runtimeapi.ContainerConfig) error {
	devs, err := ocispec.CDIDevices(cfg)
	if err != nil || len(devs) == 0 {
		return err
	}
	if s.cfg.CDI == nil {
		return fmt.Errorf("container config: CDI device %q: CDI is not configured on this daemon: %w", devs[0], errdefs.ErrFailedPrecondition)
	}
	return s.cfg.CDI.Inject(spec, devs)
}
