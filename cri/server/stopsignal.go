package server

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The signal StopContainer sends first: the container config's stop_signal,
// else the image's StopSignal, else SIGTERM (containerd's order). It is
// decided at CreateContainer and kept in the record, so an image removed
// or retagged later does not change it.

// Real-time signals as glibc numbers them (the C library keeps the
// kernel's first two, 32 and 33, for itself), as Docker's and containerd's
// parsers do: RTMIN is 34, RTMAX 64.
const (
	sigRTMIN = 34
	sigRTMAX = 64
)

// signalAliases are names of the same signals under another name.
var signalAliases = map[string]string{"CLD": "CHLD", "POLL": "IO", "IOT": "ABRT"}

// parseSignal reads a signal as an image's StopSignal may name it:
// "SIGQUIT", "QUIT", "3", "SIGRTMIN+3", "RTMAX-2".
func parseSignal(s string) (syscall.Signal, error) {
	name := strings.ToUpper(strings.TrimSpace(s))
	if n, err := strconv.Atoi(name); err == nil {
		if n <= 0 || n > sigRTMAX {
			return 0, fmt.Errorf("signal %q: out of range", s)
		}
		return syscall.Signal(n), nil
	}
	name = strings.TrimPrefix(name, "SIG")
	if alias, ok := signalAliases[name]; ok {
		name = alias
	}
	rt := func(base int, off string, sign int) (syscall.Signal, error) {
		n, err := strconv.Atoi(off)
		if err != nil || n < 0 || base+sign*n < sigRTMIN || base+sign*n > sigRTMAX {
			return 0, fmt.Errorf("signal %q: not a real-time signal", s)
		}
		return syscall.Signal(base + sign*n), nil
	}
	switch {
	case name == "RTMIN":
		return sigRTMIN, nil
	case name == "RTMAX":
		return sigRTMAX, nil
	case strings.HasPrefix(name, "RTMIN+"):
		return rt(sigRTMIN, strings.TrimPrefix(name, "RTMIN+"), 1)
	case strings.HasPrefix(name, "RTMAX-"):
		return rt(sigRTMAX, strings.TrimPrefix(name, "RTMAX-"), -1)
	}
	if sig := unix.SignalNum("SIG" + name); sig != 0 {
		return sig, nil
	}
	return 0, fmt.Errorf("signal %q: unknown", s)
}

// criSignalName is the signal name of a CRI Signal ("SIGRTMIN+1" for
// SIGNAL_SIGRTMINPLUS1), "" for SIGNAL_RUNTIME_DEFAULT.
func criSignalName(sig runtimeapi.Signal) (string, error) {
	if sig == runtimeapi.Signal_SIGNAL_RUNTIME_DEFAULT {
		return "", nil
	}
	name, ok := runtimeapi.Signal_name[int32(sig)]
	if !ok {
		return "", fmt.Errorf("stop_signal %d: not a signal of the CRI: %w", sig, errdefs.ErrInvalidArgument)
	}
	name = strings.TrimPrefix(name, "SIGNAL_")
	name = strings.Replace(name, "PLUS", "+", 1)
	return strings.Replace(name, "MINUS", "-", 1), nil
}

// stopSignalOf decides a container's stop signal: the config's, else the
// image's, else SIGTERM; returned by name ("SIGQUIT"). An image's value
// that names no signal is InvalidArgument (the container could not be
// stopped as its image asks).
func stopSignalOf(cfg *runtimeapi.ContainerConfig, image string) (string, error) {
	name, err := criSignalName(cfg.GetStopSignal())
	if err != nil || name != "" {
		return name, err
	}
	if image == "" {
		return "SIGTERM", nil
	}
	sig, err := parseSignal(image)
	if err != nil {
		return "", fmt.Errorf("the image's StopSignal: %w: %w", err, errdefs.ErrInvalidArgument)
	}
	return signalName(sig), nil
}

// signalName is a signal's canonical name: "SIGQUIT", "SIGRTMIN+3".
func signalName(sig syscall.Signal) string {
	switch n := int(sig); {
	case n == sigRTMIN:
		return "SIGRTMIN"
	case n == sigRTMAX:
		return "SIGRTMAX"
	case n > sigRTMIN && n <= sigRTMIN+15:
		return fmt.Sprintf("SIGRTMIN+%d", n-sigRTMIN)
	case n > sigRTMIN+15 && n < sigRTMAX:
		return fmt.Sprintf("SIGRTMAX-%d", sigRTMAX-n)
	}
	if name := unix.SignalName(sig); name != "" {
		return name
	}
	return strconv.Itoa(int(sig))
}

// toCRISignal is a signal name as the CRI's enum (ContainerStatus's
// stop_signal); RUNTIME_DEFAULT for one it has no value of.
func toCRISignal(name string) runtimeapi.Signal {
	name = strings.Replace(name, "+", "PLUS", 1)
	name = strings.Replace(name, "-", "MINUS", 1)
	return runtimeapi.Signal(runtimeapi.Signal_value["SIGNAL_"+name])
}

// stopSignal is the signal a container's stop sends first: its record's
// (the config's for a record of an older daemon, which kept none).
func (c *container) stopSignal() syscall.Signal {
	name := c.rec.StopSignal
	if name == "" {
		name, _ = criSignalName(c.cfg.GetStopSignal())
	}
	if sig, err := parseSignal(name); err == nil && name != "" {
		return sig
	}
	return syscall.SIGTERM
}
