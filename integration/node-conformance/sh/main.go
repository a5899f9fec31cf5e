// Command sh is /bin/sh of the busybox image of make node-conformance: it
// runs busybox's ash, as the original image does, except when the
// environment holds a variable whose name is not a shell name (data-1=...),
// and then bash. Debian's busybox 1.35 ash drops such variables from what
// its children get, while the busybox 1.37 of the original image keeps them
// (as bash does): the ConfigMap and Secret envFrom specs run `sh -c env` and
// look for them. Other specs expect ash's own messages ("/bin/sh: can't
// create /file: Read-only file system"), which bash words differently.
// argv[0] is passed on as it is, so the shell names itself as it was called.
package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

const (
	busybox = "/bin/busybox" // its ash is the applet "sh"
	bash    = "/bin/bash"
)

func main() {
	prog := busybox
	if hasNonShellName(os.Environ()) {
		prog = bash
	}
	err := syscall.Exec(prog, os.Args, os.Environ())
	fmt.Fprintf(os.Stderr, "sh: exec %s: %v\n", prog, err)
	os.Exit(127)
}

// hasNonShellName says whether a variable's name is not a POSIX shell name
// ([A-Za-z_][A-Za-z0-9_]*): one that ash 1.35 would not pass on.
func hasNonShellName(env []string) bool {
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !shellName(name) {
			return true
		}
	}
	return false
}

func shellName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		letter := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}
