package main

import (
	"bytes"
	"os"
	"strconv"
)

// maxOOMScoreAdj is the kernel's upper bound of oom_score_adj.
const maxOOMScoreAdj = 1000

// adjustOOMScore makes the shim a slightly likelier OOM victim than the
// daemon that started it: oom_score_adj = the daemon's + 1, capped at 1000.
// The shim inherits the daemon's value (the shipped unit sets -999), so
// without this every shim, and through it runc and every container whose
// spec sets no process.oomScoreAdj, would be spared by the OOM killer as
// much as the daemon itself. Called once, before anything is started, so
// what the shim starts inherits the new value. Raising the value needs no
// privilege. from is where the daemon's value is read: our own (inherited)
// for a shim started for its process, the parent's for a spare, which
// inherited the value the daemon had when it started the spare, maybe long
// before.
func adjustOOMScore(from string) error {
	const path = "/proc/self/oom_score_adj"
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(string(bytes.TrimSpace(data)))
	if err != nil {
		return wrap("read "+from, err)
	}
	if n >= maxOOMScoreAdj {
		n = maxOOMScoreAdj - 1
	}
	return os.WriteFile(path, []byte(strconv.Itoa(n+1)), 0)
}

// ownOOMScore is where a shim started for its process reads the daemon's
// oom_score_adj: its own, inherited at the fork.
const ownOOMScore = "/proc/self/oom_score_adj"

// parentOOMScore is where a spare reads it: the daemon is its parent.
func parentOOMScore() string {
	return "/proc/" + strconv.Itoa(os.Getppid()) + "/oom_score_adj"
}
