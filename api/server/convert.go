package server

import (
	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/bundle"
	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/specs"
	"github.com/evjournal/containerd/supervisor"
)

// devNull is what a process's stdio shows when the client gave no path
// (docs/api.md 2.3, Process stdio).
const devNull = "/dev/null"

// containerToProto fills a Container as docs/api.md 2.3 describes it.
func containerToProto(c supervisor.ContainerInfo) *types.Container {
	pc := &types.Container{
		Id:         c.ID,
		BundlePath: c.Bundle,
		Status:     c.Status,
		Labels:     c.Labels,
		Runtime:    c.Runtime,
	}
	for _, p := range c.Processes {
		pc.Processes = append(pc.Processes, processToProto(p))
	}
	for _, pid := range c.Pids {
		pc.Pids = append(pc.Pids, uint32(pid))
	}
	return pc
}

// processToProto echoes a process's spec. Only the effective capability set
// is reported (docs/api.md 2.3, Process capabilities); a spec without
// capabilities reports none.
func processToProto(p supervisor.ProcessInfo) *types.Process {
	sp := p.Spec
	pp := &types.Process{
		Pid:             p.ID,
		Terminal:        sp.Terminal,
		User:            userToProto(sp.User),
		Args:            sp.Args,
		Env:             sp.Env,
		Cwd:             sp.Cwd,
		SystemPid:       uint32(p.SystemPid),
		Stdin:           orDevNull(p.Stdio.Stdin),
		Stdout:          orDevNull(p.Stdio.Stdout),
		Stderr:          orDevNull(p.Stdio.Stderr),
		ApparmorProfile: sp.ApparmorProfile,
		SelinuxLabel:    sp.SelinuxLabel,
		NoNewPrivileges: sp.NoNewPrivileges,
		Rlimits:         rlimitsToProto(sp.Rlimits),
	}
	if sp.Capabilities != nil {
		pp.Capabilities = sp.Capabilities.Effective
	}
	return pp
}

func orDevNull(path string) string {
	if path == "" {
		return devNull
	}
	return path
}

func userToProto(u specs.User) *types.User {
	return &types.User{Uid: u.UID, Gid: u.GID, AdditionalGids: u.AdditionalGids}
}

func rlimitsToProto(rls []specs.POSIXRlimit) []*types.Rlimit {
	var out []*types.Rlimit
	for _, rl := range rls {
		out = append(out, &types.Rlimit{Type: rl.Type, Soft: rl.Soft, Hard: rl.Hard})
	}
	return out
}

// execRequest converts AddProcess into an exec (docs/api.md 2.3 and 3.6). The
// caller has checked that r.User is present. The capability list is used as
// the bounding, effective, inheritable and permitted sets; ambient stays
// empty, and an empty list means no capabilities at all (never the
// container's set).
func execRequest(r *types.AddProcessRequest) supervisor.ExecRequest {
	u := r.GetUser()
	spec := specs.ProcessSpec{
		Terminal: r.GetTerminal(),
		User: specs.User{
			UID:            u.GetUid(),
			GID:            u.GetGid(),
			AdditionalGids: u.GetAdditionalGids(),
		},
		Args:            r.GetArgs(),
		Env:             r.GetEnv(),
		Cwd:             r.GetCwd(),
		Capabilities:    bundle.CapabilitySets(r.GetCapabilities()),
		ApparmorProfile: r.GetApparmorProfile(),
		SelinuxLabel:    r.GetSelinuxLabel(),
		NoNewPrivileges: r.GetNoNewPrivileges(),
		Rlimits:         rlimitsFromProto(r.GetRlimits()),
	}
	return supervisor.ExecRequest{
		ID:    r.GetId(),
		Pid:   r.GetPid(),
		Spec:  spec,
		Stdio: runtime.Stdio{Stdin: r.GetStdin(), Stdout: r.GetStdout(), Stderr: r.GetStderr()},
	}
}

func rlimitsFromProto(rls []*types.Rlimit) []specs.POSIXRlimit {
	var out []specs.POSIXRlimit
	for _, rl := range rls {
		if rl == nil {
			continue
		}
		out = append(out, specs.POSIXRlimit{Type: rl.GetType(), Soft: rl.GetSoft(), Hard: rl.GetHard()})
	}
	return out
}

// checkpointToProto reports every option of a checkpoint, exit and emptyNS
// included (v0.2.9 left those two out: docs/api.md 9.3).
func checkpointToProto(c runtime.Checkpoint) *types.Checkpoint {
	return &types.Checkpoint{
		Name:        c.Name,
		Exit:        c.Exit,
		Tcp:         c.TCP,
		UnixSockets: c.UnixSockets,
		Shell:       c.Shell,
		EmptyNS:     c.EmptyNS,
	}
}

func checkpointOpts(c *types.Checkpoint) runtime.CheckpointOpts {
	return runtime.CheckpointOpts{
		Name:        c.GetName(),
		Exit:        c.GetExit(),
		TCP:         c.GetTcp(),
		UnixSockets: c.GetUnixSockets(),
		Shell:       c.GetShell(),
		EmptyNS:     c.GetEmptyNS(),
	}
}
