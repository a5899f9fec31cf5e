package server

import (
	"reflect"
	"testing"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/specs"
	"github.com/evjournal/containerd/supervisor"
)

func TestExecRequestCapabilities(t *testing.T) {
	tests := []struct {
		name string
		caps []string
	}{
		{"none", nil},
		{"empty list", []string{}},
		{"two", []string{"CAP_KILL", "CAP_CHOWN"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := execRequest(&types.AddProcessRequest{Id: "c", Pid: "p", User: &types.User{}, Capabilities: tt.caps})
			c := r.Spec.Capabilities
			if c == nil {
				t.Fatal("nil capabilities would let the runtime use a default set")
			}
			want := append([]string{}, tt.caps...)
			for name, set := range map[string][]string{
				"bounding": c.Bounding, "effective": c.Effective, "inheritable": c.Inheritable, "permitted": c.Permitted,
			} {
				if !reflect.DeepEqual(append([]string{}, set...), want) {
					t.Errorf("%s = %v, want %v", name, set, want)
				}
			}
			if len(c.Ambient) != 0 {
				t.Errorf("ambient = %v, want empty", c.Ambient)
			}
			if len(tt.caps) > 0 {
				c.Bounding[0] = "CHANGED"
				if c.Effective[0] == "CHANGED" || tt.caps[0] == "CHANGED" {
					t.Error("capability sets share memory")
				}
			}
		})
	}
}

func TestExecRequestFields(t *testing.T) {
	r := execRequest(&types.AddProcessRequest{
		Id: "c", Pid: "p", Terminal: true,
		User: &types.User{Uid: 1000, Gid: 100, AdditionalGids: []uint32{5, 6}},
		Args: []string{"sh", "-c", "true"}, Env: []string{"A=1"}, Cwd: "/w",
		Stdin: "/i", Stdout: "/o", Stderr: "/e",
		ApparmorProfile: "ap", SelinuxLabel: "sl", NoNewPrivileges: true,
		Rlimits: []*types.Rlimit{{Type: "RLIMIT_NOFILE", Soft: 10, Hard: 20}, nil},
	})
	want := supervisor.ExecRequest{
		ID: "c", Pid: "p",
		Stdio: runtime.Stdio{Stdin: "/i", Stdout: "/o", Stderr: "/e"},
		Spec: specs.ProcessSpec{
			Terminal: true,
			User:     specs.User{UID: 1000, GID: 100, AdditionalGids: []uint32{5, 6}},
			Args:     []string{"sh", "-c", "true"}, Env: []string{"A=1"}, Cwd: "/w",
			Capabilities:    &specs.LinuxCapabilities{Bounding: []string{}, Effective: []string{}, Inheritable: []string{}, Permitted: []string{}},
			ApparmorProfile: "ap", SelinuxLabel: "sl", NoNewPrivileges: true,
			Rlimits: []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Soft: 10, Hard: 20}},
		},
	}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("got  %+v\nwant %+v", r, want)
	}
}

func TestProcessToProto(t *testing.T) {
	tests := []struct {
		name     string
		in       supervisor.ProcessInfo
		wantCaps []string
		stdin    string
	}{
		{"effective set only", supervisor.ProcessInfo{ID: "init", Spec: specs.ProcessSpec{
			Capabilities: &specs.LinuxCapabilities{Bounding: []string{"CAP_A", "CAP_B"}, Effective: []string{"CAP_A"}}}},
			[]string{"CAP_A"}, "/dev/null"},
		{"no capabilities object", supervisor.ProcessInfo{ID: "e", Stdio: runtime.Stdio{Stdin: "/fifo"}}, nil, "/fifo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := processToProto(tt.in)
			if !reflect.DeepEqual(p.GetCapabilities(), tt.wantCaps) {
				t.Errorf("capabilities %v, want %v", p.GetCapabilities(), tt.wantCaps)
			}
			if p.GetStdin() != tt.stdin || p.GetStdout() != "/dev/null" || p.GetUser() == nil {
				t.Errorf("process %v", p)
			}
		})
	}
}

func TestContainerToProto(t *testing.T) {
	c := containerToProto(supervisor.ContainerInfo{
		ID: "c", Bundle: "b", Status: "paused", Labels: []string{"l"}, Runtime: "runc", Pids: []int{3, 4},
		Processes: []supervisor.ProcessInfo{{ID: "init", SystemPid: 3, Spec: specs.ProcessSpec{
			Args: []string{"sh"}, Rlimits: []specs.POSIXRlimit{{Type: "RLIMIT_CORE", Hard: 1, Soft: 1}}}}},
	})
	if c.GetId() != "c" || c.GetBundlePath() != "b" || c.GetStatus() != "paused" || c.GetRuntime() != "runc" ||
		!reflect.DeepEqual(c.GetPids(), []uint32{3, 4}) || c.GetLabels()[0] != "l" {
		t.Fatalf("container %v", c)
	}
	p := c.GetProcesses()[0]
	if p.GetPid() != "init" || p.GetSystemPid() != 3 || p.GetArgs()[0] != "sh" || p.GetRlimits()[0].GetType() != "RLIMIT_CORE" {
		t.Fatalf("process %v", p)
	}
}
