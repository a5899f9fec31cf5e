package ocispec

import (
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// seccompAction is what a filter made from s does to the syscall name
// with these arguments, as libseccomp builds it from runc's rules: a rule
// applies when every condition of it holds; an allowing rule wins, then
// any other that applies, else the default action.
func seccompAction(s *specs.LinuxSeccomp, name string, args ...uint64) specs.LinuxSeccompAction {
	var other *specs.LinuxSeccompAction
	for _, r := range s.Syscalls {
		if !slices.Contains(r.Names, name) || !conditionsHold(r.Args, args) {
			continue
		}
		if r.Action == specs.ActAllow {
			return specs.ActAllow
		}
		other = &r.Action
	}
	if other != nil {
		return *other
	}
	return s.DefaultAction
}

func conditionsHold(conds []specs.LinuxSeccompArg, args []uint64) bool {
	for _, c := range conds {
		v := uint64(0)
		if int(c.Index) < len(args) {
			v = args[c.Index]
		}
		var ok bool
		switch c.Op {
		case specs.OpEqualTo:
			ok = v == c.Value
		case specs.OpNotEqual:
			ok = v != c.Value
		case specs.OpLessThan:
			ok = v < c.Value
		case specs.OpLessEqual:
			ok = v <= c.Value
		case specs.OpGreaterThan:
			ok = v > c.Value
		case specs.OpGreaterEqual:
			ok = v >= c.Value
		case specs.OpMaskedEqual:
			ok = v&c.Value == c.ValueTwo
		}
		if !ok {
			return false
		}
	}
	return true
}

// TestDefaultSeccompSocket: the default profile denies sockets of the
// kernel's crypto API (AF_ALG) and of VM sockets (AF_VSOCK), as
// containerd's does, and allows every other family; uretprobe (which the
// kernel's return probes call) is allowed.
func TestDefaultSeccompSocket(t *testing.T) {
	for _, caps := range [][]string{nil, DefaultCaps, {"CAP_SYS_ADMIN", "CAP_NET_ADMIN", "CAP_NET_RAW"}} {
		s := defaultSeccomp(caps, [2]int{6, 12})
		for _, family := range []uint64{unix.AF_ALG, unix.AF_VSOCK} {
			if got := seccompAction(s, "socket", family, unix.SOCK_STREAM); got != specs.ActErrno {
				t.Errorf("caps %v: socket(%d) %s, want the default errno", caps, family, got)
			}
		}
		for _, family := range []uint64{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK, unix.AF_PACKET,
			unix.AF_ALG - 1, unix.AF_ALG + 1, unix.AF_VSOCK + 1, unix.AF_XDP, unix.AF_MCTP} {
			if got := seccompAction(s, "socket", family, unix.SOCK_STREAM); got != specs.ActAllow {
				t.Errorf("caps %v: socket(%d) %s, want it allowed", caps, family, got)
			}
		}
		if got := seccompAction(s, "uretprobe"); got != specs.ActAllow {
			t.Errorf("caps %v: uretprobe %s, want it allowed", caps, got)
		}
		// Each socket rule has one condition: runc would split several
		// on the same argument into rules of their own, which OR them.
		for _, r := range s.Syscalls {
			if slices.Contains(r.Names, "socket") && len(r.Args) != 1 {
				t.Errorf("socket rule %+v: want exactly one condition", r)
			}
		}
	}
}
