package ocispec

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// kernelVersion is the running kernel's major and minor version, {0, 0}
// if uname cannot say.
func kernelVersion() [2]int {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return [2]int{}
	}
	return parseKernel(unix.ByteSliceToString(u.Release[:]))
}

// parseKernel reads "6.1.0-18-amd64" or "4.8" as {6, 1} or {4, 8}.
func parseKernel(s string) [2]int {
	var v [2]int
	parts := strings.SplitN(s, ".", 3)
	for i := 0; i < 2 && i < len(parts); i++ {
		digits := parts[i]
		if end := strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }); end >= 0 {
			digits = digits[:end]
		}
		v[i], _ = strconv.Atoi(digits)
	}
	return v
}

func kernelLess(a, b [2]int) bool {
	return a[0] < b[0] || (a[0] == b[0] && a[1] < b[1])
}

// oomFloor is the lowest oom_score_adj this process can give a child: its
// own, if it lacks CAP_SYS_RESOURCE (lowering the score needs it), else
// -1000. A variable for tests.
var oomFloor = func() int {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1000
	}
	for _, line := range strings.Split(string(status), "\n") {
		hex, ok := strings.CutPrefix(line, "CapEff:")
		if !ok {
			continue
		}
		caps, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
		if err != nil || caps&(1<<unix.CAP_SYS_RESOURCE) != 0 {
			return -1000
		}
		own, err := os.ReadFile("/proc/self/oom_score_adj")
		if err != nil {
			return -1000
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(own)))
		if err != nil {
			return -1000
		}
		return n
	}
	return -1000
}

// restrictOOMScoreAdj raises v to what this process may set (containerd's
// restrict_oom_score_adj, decided from the capability rather than a
// setting): in a container or a service without CAP_SYS_RESOURCE, runc
// would fail to lower a child's score below its own.
func restrictOOMScoreAdj(v int) int {
	return max(v, oomFloor())
}
