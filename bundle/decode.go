package bundle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/specs"
)

// Config is what the daemon keeps of a bundle's config.json: the spec
// version, the dialect an exec's process must be written in (the bundle's,
// or today's once a runtime of today's spec runs a translation of it:
// Translate), the init process (reported by State) and the host ids of
// container root. It is saved in the container's state.json, so it is the
// daemon's own copy.
type Config struct {
	Version string            `json:"ociVersion"`
	Dialect Dialect           `json:"dialect"`
	Process specs.ProcessSpec `json:"process"`
	RootUID uint32            `json:"rootUID"`
	RootGID uint32            `json:"rootGID"`
}

// rawConfig holds the members of config.json the daemon reads. Everything
// else (mounts, hooks, devices, resources, seccomp...) is the runtime's
// business and is not decoded at all, so its shape in any spec version is
// accepted as it is.
type rawConfig struct {
	Version string          `json:"ociVersion"`
	Process json.RawMessage `json:"process"`
	Linux   *struct {
		UIDMappings []idMapping `json:"uidMappings"`
		GIDMappings []idMapping `json:"gidMappings"`
	} `json:"linux"`
}

type idMapping struct {
	ContainerID uint32 `json:"containerID"`
	HostID      uint32 `json:"hostID"`
	Size        uint32 `json:"size"`
}

// rawProcess is today's process object except for capabilities, the one
// member whose shape changed (a list of names before 1.0.0-rc5, an object
// of sets since); the shallower field wins over the embedded one.
type rawProcess struct {
	specs.ProcessSpec
	Capabilities json.RawMessage `json:"capabilities"`
}

// Decode reads a config.json. Unknown members are ignored; a member the
// daemon reads with the wrong type is an ErrInvalidArgument naming it.
func Decode(data []byte) (*Config, error) {
	var raw rawConfig
	if err := unmarshal(data, &raw, ""); err != nil {
		return nil, err
	}
	if isNull(raw.Process) {
		return nil, fmt.Errorf("no process: %w", errdefs.ErrInvalidArgument)
	}
	proc, capList, err := decodeProcess(raw.Process)
	if err != nil {
		return nil, err
	}
	cfg := &Config{Version: raw.Version, Process: proc, Dialect: dialectOf(raw.Version, capList)}
	if raw.Linux != nil {
		cfg.RootUID, cfg.RootGID = rootOf(raw.Linux.UIDMappings), rootOf(raw.Linux.GIDMappings)
	}
	return cfg, nil
}

// DecodeProcess reads a process object of any spec version; capList is
// nil when it has no capabilities, else whether they are a list of names.
func DecodeProcess(data []byte) (p specs.ProcessSpec, capList *bool, err error) {
	return decodeProcess(data)
}

func decodeProcess(data []byte) (specs.ProcessSpec, *bool, error) {
	var raw rawProcess
	if err := unmarshal(data, &raw, "process."); err != nil {
		return specs.ProcessSpec{}, nil, err
	}
	p := raw.ProcessSpec
	caps, capList, err := decodeCapabilities(raw.Capabilities)
	if err != nil {
		return specs.ProcessSpec{}, nil, err
	}
	p.Capabilities = caps
	return p, capList, nil
}

// decodeCapabilities accepts both shapes. A list grants its names in the
// bounding, effective, inheritable and permitted sets, which is what the
// runtimes of the list era did with it.
func decodeCapabilities(data json.RawMessage) (*specs.LinuxCapabilities, *bool, error) {
	data = bytes.TrimSpace(data)
	if isNull(data) {
		return nil, nil, nil
	}
	isList := data[0] == '['
	if isList {
		var names []string
		if err := unmarshal(data, &names, "process.capabilities"); err != nil {
			return nil, nil, err
		}
		return CapabilitySets(names), &isList, nil
	}
	if data[0] != '{' {
		return nil, nil, fmt.Errorf("process.capabilities: want a list of names (spec before 1.0.0-rc5) or an object of sets, got %.20s: %w", data, errdefs.ErrInvalidArgument)
	}
	var caps specs.LinuxCapabilities
	if err := unmarshal(data, &caps, "process.capabilities."); err != nil {
		return nil, nil, err
	}
	return &caps, &isList, nil
}

// CapabilitySets gives each of the bounding, effective, inheritable and
// permitted sets its own copy of names (ambient stays empty), so nothing
// downstream changes one set through another. It is never nil: a nil
// Capabilities would let a runtime fall back to a default set.
func CapabilitySets(names []string) *specs.LinuxCapabilities {
	set := func() []string { return append([]string{}, names...) }
	return &specs.LinuxCapabilities{Bounding: set(), Effective: set(), Inheritable: set(), Permitted: set()}
}

func rootOf(maps []idMapping) uint32 {
	for _, m := range maps {
		if m.ContainerID == 0 {
			return m.HostID
		}
	}
	return 0
}

// unmarshal decodes data into v and turns a type mismatch into an error
// naming the member (prefix + the decoder's dotted path).
func unmarshal(data []byte, v any, prefix string) error {
	err := json.Unmarshal(data, v)
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &te):
		// The path runs through rawProcess's embedded struct: not a member.
		field := strings.TrimSuffix(prefix+strings.TrimPrefix(te.Field, "ProcessSpec."), ".")
		if field == "" {
			field = "the document"
		}
		return fmt.Errorf("%s: want %s, got a JSON %s: %w", field, te.Type, te.Value, errdefs.ErrInvalidArgument)
	}
	return fmt.Errorf("invalid JSON: %v: %w", err, errdefs.ErrInvalidArgument)
}

func isNull(data []byte) bool {
	data = bytes.TrimSpace(data)
	return len(data) == 0 || string(data) == "null"
}
