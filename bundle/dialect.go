package bundle

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/evjournal/containerd/specs"
)

// Dialect is how a runtime that runs a bundle wants a process object
// written: the runtimes of spec 1.0.0-rc1 to rc4 (runc up to 1.0.0-rc2,
// shipped with Docker 1.12 and 1.13) take the capabilities as a flat list
// of names and reject the object. Every other member of the process object
// has kept its shape, and old runtimes ignore members they do not know.
type Dialect struct {
	CapabilityList bool `json:"capabilityList,omitempty"`
}

// dialectOf prefers the shape of the bundle's own capabilities: the runtime
// the client ships accepts the shape it writes. Without capabilities the
// spec version decides.
func dialectOf(version string, capList *bool) Dialect {
	if capList != nil {
		return Dialect{CapabilityList: *capList}
	}
	return DialectFor(version)
}

// DialectFor is the dialect of spec version v; an unreadable version is
// taken as current.
func DialectFor(v string) Dialect { return Dialect{CapabilityList: capabilityListVersion(v)} }

// capabilityListVersion reports whether spec version v ("1.0.0-rc2-dev",
// "0.6.0", "1.0.2"...) predates the capabilities object (1.0.0-rc5). An
// unreadable version is taken as current.
func capabilityListVersion(v string) bool {
	core, pre, _ := strings.Cut(v, "-")
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	patch, err3 := strconv.Atoi(parts[2])
	switch {
	case err1 != nil || err2 != nil || err3 != nil:
		return false
	case major == 0:
		return true
	case major > 1 || minor > 0 || patch > 0:
		return false
	}
	rc, ok := strings.CutPrefix(pre, "rc")
	if !ok {
		return false
	}
	n, err := strconv.Atoi(strings.SplitN(rc, "-", 2)[0])
	return err == nil && n < 5
}

// listProcess is a process object with the capabilities as a list; a nil
// pointer leaves them out, an empty list says "none".
type listProcess struct {
	specs.ProcessSpec
	Capabilities *[]string `json:"capabilities,omitempty"`
}

// EncodeProcess writes p as this dialect's runtime reads it. In the list
// dialect the effective set is the list: it never grants more than the
// process was to have.
func (d Dialect) EncodeProcess(p specs.ProcessSpec) ([]byte, error) {
	if !d.CapabilityList {
		return json.Marshal(p)
	}
	lp := listProcess{ProcessSpec: p}
	if p.Capabilities != nil {
		names := append([]string{}, p.Capabilities.Effective...)
		lp.Capabilities = &names
	}
	lp.ProcessSpec.Capabilities = nil
	return json.Marshal(lp)
}

// rc2BlockIO are the block IO member names of the capability-list era
// (spec 1.0.0-rc2's "blkioWeight"...), by today's name.
var rc2BlockIO = map[string]string{
	"weight": "blkioWeight", "leafWeight": "blkioLeafWeight", "weightDevice": "blkioWeightDevice",
	"throttleReadBpsDevice": "blkioThrottleReadBpsDevice", "throttleWriteBpsDevice": "blkioThrottleWriteBpsDevice",
	"throttleReadIOPSDevice": "blkioThrottleReadIOPSDevice", "throttleWriteIOPSDevice": "blkioThrottleWriteIOPSDevice",
}

// EncodeResources writes r as this dialect's `runc update -r -` reads it.
// Only the block IO members were renamed since: a runc of the list era
// ignores "weight" and would silently change nothing.
func (d Dialect) EncodeResources(r *specs.LinuxResources) ([]byte, error) {
	data, err := json.Marshal(r)
	if err != nil || !d.CapabilityList || r.BlockIO == nil {
		return data, err
	}
	var doc map[string]json.RawMessage
	var bio map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(doc["blockIO"], &bio); err != nil {
		return nil, err
	}
	old := make(map[string]json.RawMessage, len(bio))
	for k, v := range bio {
		if n, ok := rc2BlockIO[k]; ok {
			k = n
		}
		old[k] = v
	}
	if doc["blockIO"], err = json.Marshal(old); err != nil {
		return nil, err
	}
	return json.Marshal(doc)
}
