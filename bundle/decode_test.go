package bundle

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/specs"
)

// currentConfig is a config.json as a client of today's spec writes it.
func currentConfig(t *testing.T) []byte {
	caps := []string{"CAP_KILL"}
	uid := uint32(7)
	data, err := json.Marshal(&specs.Spec{
		Version: specs.Version,
		Root:    &specs.Root{Path: "rootfs"},
		Process: &specs.ProcessSpec{
			User: specs.User{UID: uid, GID: 8, Umask: &uid}, Args: []string{"/testinit"}, Cwd: "/",
			Capabilities: &specs.LinuxCapabilities{Bounding: caps, Effective: caps, Permitted: caps},
			Rlimits:      []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 64, Soft: 64}},
		},
		Mounts: []specs.Mount{{Destination: "/proc", Type: "proc", Source: "proc"}},
		Linux:  &specs.Linux{Namespaces: []specs.LinuxNamespace{{Type: "pid"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestDecodeVersions reads a bundle of each spec version a 0.2-era or a
// current client writes, and converts an exec's process for each into the
// shape that version's runtime decodes.
func TestDecodeVersions(t *testing.T) {
	all := []string{"CAP_CHOWN", "CAP_KILL", "CAP_NET_BIND_SERVICE"}
	tests := []struct {
		file      string
		version   string
		capList   bool
		args      []string
		user      specs.User
		effective []string
		bounding  []string
		nofile    uint64
		rootUID   uint32
		rootGID   uint32
	}{
		{"config-1.0.0-rc1.json", "1.0.0-rc1", true, []string{"sh", "-c", "echo rc1"}, specs.User{UID: 1000, GID: 1000, AdditionalGids: []uint32{10}}, all, all, 1024, 100000, 200000},
		{"config-1.0.0-rc2.json", "1.0.0-rc2-dev", true, []string{"/bin/sleep", "100"}, specs.User{}, []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_KILL", "CAP_SETUID", "CAP_AUDIT_WRITE"}, []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_KILL", "CAP_SETUID", "CAP_AUDIT_WRITE"}, 1048576, 0, 0},
		{"config-1.0.0-rc5.json", "1.0.0-rc5", false, []string{"sh"}, specs.User{}, []string{"CAP_AUDIT_WRITE", "CAP_KILL"}, []string{"CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"}, 1024, 0, 0},
		{"config-1.0.0.json", "1.0.0", false, []string{"sh"}, specs.User{UID: 1, GID: 1, AdditionalGids: []uint32{5, 6}}, []string{"CAP_KILL"}, []string{"CAP_AUDIT_WRITE", "CAP_KILL"}, 1024, 1000, 1000},
		{"config-1.0.2.json", "1.0.2", false, []string{"/testinit", "sleep", "forever"}, specs.User{Umask: ptr(uint32(18))}, []string{"CAP_KILL"}, []string{"CAP_KILL"}, 1024, 0, 0},
		{"config-1.2.0.json", "1.2.0", false, []string{"/testinit", "sleep", "forever"}, specs.User{}, []string{"CAP_KILL"}, []string{"CAP_KILL", "CAP_NET_RAW"}, 4096, 0, 0},
		{"current", specs.Version, false, []string{"/testinit"}, specs.User{UID: 7, GID: 8, Umask: ptr(uint32(7))}, []string{"CAP_KILL"}, []string{"CAP_KILL"}, 64, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data := currentConfig(t)
			if tt.file != "current" {
				data = readTestdata(t, tt.file)
			}
			cfg, err := Decode(data)
			if err != nil {
				t.Fatal(err)
			}
			p := cfg.Process
			switch {
			case cfg.Version != tt.version || cfg.Dialect.CapabilityList != tt.capList:
				t.Errorf("version %q, capability list %v; want %q, %v", cfg.Version, cfg.Dialect.CapabilityList, tt.version, tt.capList)
			case !reflect.DeepEqual(p.Args, tt.args) || !reflect.DeepEqual(p.User, tt.user):
				t.Errorf("args %q user %+v; want %q %+v", p.Args, p.User, tt.args, tt.user)
			case p.Capabilities == nil || !reflect.DeepEqual(p.Capabilities.Effective, tt.effective) || !reflect.DeepEqual(p.Capabilities.Bounding, tt.bounding):
				t.Errorf("capabilities %+v; want effective %q bounding %q", p.Capabilities, tt.effective, tt.bounding)
			case len(p.Rlimits) != 1 || p.Rlimits[0].Hard != tt.nofile:
				t.Errorf("rlimits %+v; want RLIMIT_NOFILE %d", p.Rlimits, tt.nofile)
			case cfg.RootUID != tt.rootUID || cfg.RootGID != tt.rootGID:
				t.Errorf("root ids %d:%d; want %d:%d", cfg.RootUID, cfg.RootGID, tt.rootUID, tt.rootGID)
			}
			checkExecDialect(t, cfg.Dialect)
		})
	}
}

func ptr[T any](v T) *T { return &v }

// checkExecDialect converts an exec's process (as AddProcess builds it)
// into the dialect and decodes it as that era's runtime does: a list era
// runtime has `Capabilities []string` and fails on an object, a later one
// the reverse. Reading it back gives the same process.
func checkExecDialect(t *testing.T, d Dialect) {
	t.Helper()
	exec := specs.ProcessSpec{Args: []string{"/testinit", "exit", "3"}, Cwd: "/", Capabilities: CapabilitySets([]string{"CAP_KILL", "CAP_CHOWN"})}
	data, err := d.EncodeProcess(exec)
	if err != nil {
		t.Fatal(err)
	}
	var listEra struct {
		Args         []string `json:"args"`
		Capabilities []string `json:"capabilities"`
	}
	var objectEra struct {
		Capabilities *specs.LinuxCapabilities `json:"capabilities"`
	}
	errList, errObject := json.Unmarshal(data, &listEra), json.Unmarshal(data, &objectEra)
	if d.CapabilityList {
		if errList != nil || errObject == nil || !reflect.DeepEqual(listEra.Capabilities, []string{"CAP_KILL", "CAP_CHOWN"}) || len(listEra.Args) != 3 {
			t.Errorf("list dialect: %s (list era: %v, object era: %v)", data, errList, errObject)
		}
	} else if errObject != nil || errList == nil || !reflect.DeepEqual(objectEra.Capabilities, exec.Capabilities) {
		t.Errorf("object dialect: %s (list era: %v, object era: %v)", data, errList, errObject)
	}
	back, capList, err := DecodeProcess(data)
	if err != nil || capList == nil || *capList != d.CapabilityList || !reflect.DeepEqual(back, exec) {
		t.Errorf("read back %s: %+v, list %v, %v; want %+v", data, back, capList, err, exec)
	}
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestDialectByVersion: without capabilities in the bundle, its version
// decides.
func TestDialectByVersion(t *testing.T) {
	for v, list := range map[string]bool{
		"0.6.0": true, "1.0.0-rc1": true, "1.0.0-rc2-dev": true, "1.0.0-rc4": true,
		"1.0.0-rc5": false, "1.0.0-rc5-dev": false, "1.0.0": false, "1.0.2-dev": false, "1.3.0": false, "": false, "x.y": false,
	} {
		cfg, err := Decode([]byte(`{"ociVersion":"` + v + `","process":{"args":["a"],"cwd":"/"}}`))
		if err != nil || cfg.Dialect.CapabilityList != list {
			t.Errorf("%q: capability list %v, %v; want %v", v, cfg != nil && cfg.Dialect.CapabilityList, err, list)
		}
	}
}

// TestDecodeErrors: what the daemon cannot use is InvalidArgument, and the
// text names the member.
func TestDecodeErrors(t *testing.T) {
	for doc, want := range map[string]string{
		`not json`:                         "invalid JSON",
		`{"ociVersion":"1.0.0"}`:           "no process",
		`{"process":null}`:                 "no process",
		`{"process":{"capabilities":7}}`:   "process.capabilities: want a list of names",
		`{"process":{"capabilities":[1]}}`: "process.capabilities: want string",
		`{"process":{"capabilities":{"effective":"CAP_KILL"}}}`:   "process.capabilities.effective: want []string",
		`{"process":{"args":"sh"}}`:                               "process.args: want []string",
		`{"process":{"user":{"uid":-1}}}`:                         "process.user.uid: want uint32",
		`{"ociVersion":1,"process":{}}`:                           "ociVersion: want string",
		`{"process":{},"linux":{"uidMappings":[{"hostID":"x"}]}}`: "linux.uidMappings.hostID: want uint32",
		`[]`: "the document: want bundle.rawConfig",
	} {
		_, err := Decode([]byte(doc))
		if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want InvalidArgument containing %q", doc, err, want)
		}
	}
}

// TestEncodeResources: `runc update` input in each dialect; only the block
// IO member names differ.
func TestEncodeResources(t *testing.T) {
	w, limit := uint16(500), int64(1<<20)
	r := &specs.LinuxResources{
		Memory:  &specs.LinuxMemory{Limit: &limit},
		BlockIO: &specs.LinuxBlockIO{Weight: &w, ThrottleReadBpsDevice: []specs.LinuxThrottleDevice{{Rate: 7}}},
	}
	for _, tc := range []struct {
		d    Dialect
		want string
	}{
		{Dialect{}, `{"memory":{"limit":1048576},"blockIO":{"weight":500,"throttleReadBpsDevice":[{"major":0,"minor":0,"rate":7}]}}`},
		{Dialect{CapabilityList: true}, `{"blockIO":{"blkioThrottleReadBpsDevice":[{"major":0,"minor":0,"rate":7}],"blkioWeight":500},"memory":{"limit":1048576}}`},
	} {
		got, err := tc.d.EncodeResources(r)
		if err != nil || string(got) != tc.want {
			t.Errorf("%+v: %s, %v\nwant %s", tc.d, got, err, tc.want)
		}
	}
}
