package harness

import (
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// CNINet is a CNI network of the run: a bridge of its own with
// masquerading and host ports (so that a pod makes iptables rules, as on a
// node), on a /24 no other network of the run has, host-local leases in a
// dir of its own. Its conflist is the only file of ConfDir.
type CNINet struct {
	Name    string // the network's name ("<name>-<tag>")
	Bridge  string
	Subnet  string // "10.x.y.0/24"
	IPAMDir string
	ConfDir string
}

// NewCNINet writes a network's conflist under dir (dir/cni-conf) and
// registers its removal: the bridge, and every iptables rule and CNI chain
// naming the network or an address of its subnet (what a pod whose CNI DEL
// never ran leaves).
func (e *Env) NewCNINet(dir, name string) (*CNINet, error) {
	e.mu.Lock()
	e.nets++
	seq := e.nets
	var subnet string
	for subnet == "" || e.subnets[subnet] {
		var b [2]byte
		if _, err := rand.Read(b[:]); err != nil {
			e.mu.Unlock()
			return nil, err
		}
		subnet = fmt.Sprintf("10.%d.%d.0/24", 150+int(b[0])%50, b[1])
	}
	if e.subnets == nil {
		e.subnets = map[string]bool{}
	}
	e.subnets[subnet] = true
	e.mu.Unlock()
	n := &CNINet{Name: name + "-" + e.Tag, Bridge: fmt.Sprintf("cr%s%d", e.Tag[1:], seq), Subnet: subnet,
		IPAMDir: filepath.Join(dir, "ipam"), ConfDir: filepath.Join(dir, "cni-conf")}
	conf := fmt.Sprintf(`{"cniVersion": "1.0.0", "name": %q, "plugins": [
  {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "dataDir": %q, "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}`, n.Name, n.Bridge, n.Subnet, n.IPAMDir)
	if err := os.MkdirAll(n.ConfDir, 0o755); err != nil {
		return nil, err
	}
	e.Defer(n.Remove)
	return n, os.WriteFile(filepath.Join(n.ConfDir, "10-"+name+".conflist"), []byte(conf), 0o644)
}

// Remove deletes the bridge and the network's iptables rules. Idempotent.
func (n *CNINet) Remove() {
	exec.Command("ip", "link", "del", n.Bridge).Run()
	RemoveIPTables(n.Name, n.Subnet)
}

// perPodChain is a chain the bridge (CNI-<hash>) or portmap (CNI-DN-<hash>)
// plugin makes for one pod; the shared ones (CNI-HOSTPORT-*, CNI-FORWARD)
// are left alone.
var perPodChain = regexp.MustCompile(`^CNI-(DN-)?[0-9a-f]{16,}$`)

// RemoveIPTables deletes, in every table, the rules that name the network
// (in a CNI comment) or an address of its /24 subnet, then flushes and
// deletes the per-pod chains they jumped to or were in.
func RemoveIPTables(network, subnet string) {
	prefix, _ := strings.CutSuffix(subnet, "0/24")
	for _, table := range []string{"nat", "filter", "mangle"} {
		out, err := exec.Command("iptables-save", "-t", table).Output()
		if err != nil {
			continue
		}
		chains := map[string]bool{}
		for line := range strings.Lines(string(out)) {
			line = strings.TrimSpace(line)
			if !strings.HasPrefix(line, "-A ") {
				continue
			}
			if !(prefix != "" && strings.Contains(line, prefix) || strings.Contains(line, `\"`+network+`\"`)) {
				continue
			}
			args := splitRule(line)
			if len(args) > 1 && perPodChain.MatchString(args[1]) {
				chains[args[1]] = true // a pod's chain whose jump a partial DEL removed
			}
			for i, a := range args {
				if (a == "-j" || a == "-g") && i+1 < len(args) && perPodChain.MatchString(args[i+1]) {
					chains[args[i+1]] = true
				}
			}
			args[0] = "-D"
			exec.Command("iptables", append([]string{"-w", "-t", table}, args...)...).Run()
		}
		for c := range chains {
			exec.Command("iptables", "-w", "-t", table, "-F", c).Run()
			exec.Command("iptables", "-w", "-t", table, "-X", c).Run()
		}
	}
}

// splitRule splits a rule line of iptables-save into arguments: words, or
// double-quoted strings with backslash escapes (comments).
func splitRule(line string) []string {
	var args []string
	var cur strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quoted && c == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
		case quoted && c == '"':
			quoted = false
		case !quoted && c == '"':
			quoted, inWord = true, true
		case !quoted && c == ' ':
			if inWord {
				args = append(args, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		args = append(args, cur.String())
	}
	return args
}

// UnmountUnder detaches every mount below dir, deepest first: what a
// CRI daemon killed with pods up leaves (netns pins, /dev/shm tmpfs,
// rootfs overlays).
func UnmountUnder(dir string) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		p := unescapeMountPath(f[4])
		if strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	for _, p := range points {
		unix.Unmount(p, unix.MNT_DETACH)
	}
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
