package server

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ifaceCounters are one network interface's counters.
type ifaceCounters struct {
	name                                    string
	rxBytes, rxPackets, rxErrors, rxDropped uint64
	txBytes, txPackets, txErrors, txDropped uint64
}

// defaultIface is the interface CNI plugins give a pod, reported as its
// default (as containerd does); the first other one when it is missing.
const defaultIface = "eth0"

// procNetDev reads the interfaces of pid's network namespace from
// /proc/<pid>/net/dev, which the kernel answers for the namespace of that
// process: one small file read, no setns (which would take an OS thread
// out of the daemon's use) and no netlink socket per pod. The loopback is
// left out.
func procNetDev(pid int) ([]ifaceCounters, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/net/dev")
	if err != nil {
		return nil, err
	}
	return parseNetDev(bytes.NewReader(data))
}

// parseNetDev parses /proc/net/dev: two header lines, then
// "name: rx bytes packets errs drop fifo frame compressed multicast tx
// bytes packets errs drop fifo colls carrier compressed".
func parseNetDev(r io.Reader) ([]ifaceCounters, error) {
	var out []ifaceCounters
	sc := bufio.NewScanner(r)
	for n := 0; sc.Scan(); n++ {
		if n < 2 {
			continue
		}
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			return nil, fmt.Errorf("net/dev: line %d: %q", n+1, sc.Text())
		}
		name = strings.TrimSpace(name)
		f := strings.Fields(rest)
		if len(f) < 16 {
			return nil, fmt.Errorf("net/dev: %s: %d fields, want 16", name, len(f))
		}
		var v [16]uint64
		for i := range v {
			x, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("net/dev: %s: %w", name, err)
			}
			v[i] = x
		}
		if name == "lo" {
			continue
		}
		out = append(out, ifaceCounters{name: name, rxBytes: v[0], rxPackets: v[1], rxErrors: v[2], rxDropped: v[3],
			txBytes: v[8], txPackets: v[9], txErrors: v[10], txDropped: v[11]})
	}
	return out, sc.Err()
}

// networkUsage is the CRI's form of a pod's interfaces.
func networkUsage(at time.Time, ifs []ifaceCounters) *runtimeapi.NetworkUsage {
	out := &runtimeapi.NetworkUsage{Timestamp: at.UnixNano()}
	for _, i := range ifs {
		u := &runtimeapi.NetworkInterfaceUsage{Name: i.name,
			RxBytes: &runtimeapi.UInt64Value{Value: i.rxBytes}, RxErrors: &runtimeapi.UInt64Value{Value: i.rxErrors},
			TxBytes: &runtimeapi.UInt64Value{Value: i.txBytes}, TxErrors: &runtimeapi.UInt64Value{Value: i.txErrors}}
		out.Interfaces = append(out.Interfaces, u)
		if i.name == defaultIface {
			out.DefaultInterface = u
		}
	}
	if out.DefaultInterface == nil && len(out.Interfaces) > 0 {
		out.DefaultInterface = out.Interfaces[0]
	}
	return out
}
