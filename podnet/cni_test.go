package podnet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

// testNet is a pod network of its own per test: its own bridge, subnet,
// IPAM dir, CNI cache and netns dir, all removed at the end.
type testNet struct {
	*Network
	name, bridge string
	subnet       *net.IPNet
	gateway      net.IP
	dataDir      string // host-local's: one file per leased IP
	nsDir        string
	confDir      string
}

func newTestNet(t *testing.T, ipMasq bool) *testNet {
	t.Helper()
	needPlugins(t)
	dir := t.TempDir()
	suffix := randHex(t, 4)
	// 10.200.0.0/16 - 10.249.255.0/24: private, and unlikely to be a route
	// of this machine; the bridge name is IFNAMSIZ-1 = 15 characters.
	third, second := rand.IntN(256), 200+rand.IntN(50)
	tn := &testNet{
		name:    "cnitest-" + suffix,
		bridge:  "cnitest" + suffix,
		subnet:  &net.IPNet{IP: net.IPv4(10, byte(second), byte(third), 0).To4(), Mask: net.CIDRMask(24, 32)},
		gateway: net.IPv4(10, byte(second), byte(third), 1).To4(),
		dataDir: filepath.Join(dir, "ipam"),
		nsDir:   filepath.Join(dir, "netns"),
	}
	confDir := filepath.Join(dir, "net.d")
	tn.confDir = confDir
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": %q,
  "plugins": [
    {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": %t,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "dataDir": %q,
              "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}`, tn.name, tn.bridge, ipMasq, tn.subnet.String(), tn.dataDir)
	if err := os.WriteFile(filepath.Join(confDir, "10-test.conflist"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := NewNetwork(Config{ConfDir: confDir, CacheDir: filepath.Join(dir, "cache")})
	if err != nil {
		t.Fatal(err)
	}
	tn.Network = n
	t.Cleanup(func() { tn.cleanup(t) })
	return tn
}

// cleanup removes the bridge (the plugin leaves it for the next pod) and
// checks the plugins left no iptables rule for this network.
func (tn *testNet) cleanup(t *testing.T) {
	if l, err := netlink.LinkByName(tn.bridge); err == nil {
		if err := netlink.LinkDel(l); err != nil {
			t.Errorf("delete bridge %s: %v", tn.bridge, err)
		}
	}
	if dump := iptablesSave(t); strings.Contains(dump, tn.name) {
		t.Errorf("iptables rules of network %s left behind:\n%s", tn.name, grepLines(dump, tn.name))
	}
}

type testPod struct {
	id  string
	ns  *NetNS
	res Result
}

// runPod makes a pod's netns and plugs it in; cleanup unplugs and removes.
func (tn *testNet) runPod(t *testing.T, opts SetupOptions) *testPod {
	t.Helper()
	p := &testPod{id: "pod-" + randHex(t, 8)}
	ns, err := NewNetNS(tn.nsDir, p.id)
	if err != nil {
		t.Fatal(err)
	}
	p.ns = ns
	t.Cleanup(func() {
		if err := tn.Teardown(context.Background(), p.id, ns.Path()); err != nil {
			t.Errorf("cleanup teardown: %v", err)
		}
		if err := ns.Remove(); err != nil {
			t.Errorf("cleanup netns: %v", err)
		}
	})
	if p.res, err = tn.Setup(context.Background(), p.id, ns.Path(), opts); err != nil {
		t.Fatal(err)
	}
	if p.res.Interface != "eth0" || len(p.res.IPs) != 1 || !tn.subnet.Contains(p.res.IPs[0]) {
		t.Fatalf("setup result %+v, want one IP in %s on eth0", p.res, tn.subnet)
	}
	return p
}

func (p *testPod) ip() net.IP { return p.res.IPs[0] }

// checkInterfaces looks inside the pod: eth0 has the pod's IP, lo is up.
func (p *testPod) checkInterfaces(t *testing.T) {
	t.Helper()
	err := p.ns.Do(func() error {
		lo, err := net.InterfaceByName("lo")
		if err != nil {
			return err
		}
		if lo.Flags&net.FlagUp == 0 {
			return errors.New("lo is down")
		}
		eth0, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		addrs, err := eth0.Addrs()
		if err != nil {
			return err
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.Equal(p.ip()) {
				return nil
			}
		}
		return fmt.Errorf("eth0 has %v, not %s", addrs, p.ip())
	})
	if err != nil {
		t.Fatalf("pod %s: %v", p.id, err)
	}
}

// serve listens on port inside the pod and greets every connection.
func (p *testPod) serve(t *testing.T, port int) string {
	t.Helper()
	var l net.Listener
	err := p.ns.Do(func() (err error) {
		l, err = net.Listen("tcp4", fmt.Sprintf(":%d", port))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	greeting := "hello from " + p.id
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, greeting)
			c.Close()
		}
	}()
	return greeting
}

// dial connects to addr and returns the greeting line.
func dial(addr string) (string, error) {
	c, err := net.DialTimeout("tcp4", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp4", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func iptablesSave(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("iptables-save").CombinedOutput()
	if err != nil {
		t.Fatalf("iptables-save: %v: %s", err, out)
	}
	return string(out)
}

func grepLines(s, sub string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

var jumpRe = regexp.MustCompile(`-j (CNI-[A-Za-z0-9-]+)`)

// podChains are the per-pod iptables chains: the targets of the rules
// whose comment names the pod.
func podChains(dump, podID string) []string {
	var chains []string
	for _, m := range jumpRe.FindAllStringSubmatch(grepLines(dump, podID), -1) {
		chains = append(chains, m[1])
	}
	return chains
}

// checkReleased asserts Teardown left nothing of the pod on the host: no
// IP lease, no port on the bridge, no iptables rule or chain.
func (tn *testNet) checkReleased(t *testing.T, p *testPod, chains []string) {
	t.Helper()
	lease := filepath.Join(tn.dataDir, tn.name, p.ip().String())
	if _, err := os.Stat(lease); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("IP %s still leased (%s): %v", p.ip(), lease, err)
	}
	dump := iptablesSave(t)
	if strings.Contains(dump, p.id) {
		t.Errorf("iptables rules of pod %s left:\n%s", p.id, grepLines(dump, p.id))
	}
	for _, c := range chains {
		if strings.Contains(dump, ":"+c+" ") {
			t.Errorf("iptables chain %s of pod %s left", c, p.id)
		}
	}
}

func (tn *testNet) bridgePorts(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join("/sys/class/net", tn.bridge, "brif"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestPodNetwork(t *testing.T) {
	tn := newTestNet(t, true)
	if err := tn.Status(); err != nil {
		t.Fatalf("Status: %v", err)
	}
	hostPort := freePort(t)
	a := tn.runPod(t, SetupOptions{Namespace: "default", Name: "a"})
	b := tn.runPod(t, SetupOptions{Namespace: "default", Name: "b", PortMappings: []PortMapping{
		{HostPort: int32(hostPort), ContainerPort: 8080, Protocol: "TCP"},
	}})
	if a.ip().Equal(b.ip()) {
		t.Fatalf("both pods got %s", a.ip())
	}
	a.checkInterfaces(t)
	b.checkInterfaces(t)
	if ports := tn.bridgePorts(t); len(ports) != 2 {
		t.Fatalf("bridge ports %v, want two veths", ports)
	}
	greeting := b.serve(t, 8080)

	t.Run("pod to pod", func(t *testing.T) {
		var got string
		err := a.ns.Do(func() (err error) {
			got, err = dial(net.JoinHostPort(b.ip().String(), "8080"))
			return err
		})
		if err != nil || got != greeting {
			t.Fatalf("a -> b: %q, %v", got, err)
		}
	})
	for _, host := range []string{tn.gateway.String(), "127.0.0.1"} {
		t.Run("host port via "+host, func(t *testing.T) {
			got, err := dial(net.JoinHostPort(host, fmt.Sprint(hostPort)))
			if err != nil || got != greeting {
				t.Fatalf("host -> %s:%d: %q, %v", host, hostPort, got, err)
			}
		})
	}

	dump := iptablesSave(t)
	chains := map[*testPod][]string{a: podChains(dump, a.id), b: podChains(dump, b.id)}
	if len(chains[a]) < 1 || len(chains[b]) < 2 {
		t.Fatalf("want a masquerade chain for both pods and a port-mapping one for b, have:\n%s", grepLines(dump, "CNI-"))
	}
	for _, p := range []*testPod{a, b} {
		for range 2 { // the second time is a no-op
			if err := tn.Teardown(context.Background(), p.id, p.ns.Path()); err != nil {
				t.Fatalf("teardown %s: %v", p.id, err)
			}
		}
		tn.checkReleased(t, p, chains[p])
	}
	if ports := tn.bridgePorts(t); len(ports) != 0 {
		t.Fatalf("bridge ports %v after teardown, want none", ports)
	}
	if _, err := dial(net.JoinHostPort(tn.gateway.String(), fmt.Sprint(hostPort))); err == nil {
		t.Fatal("host port still forwarded after teardown")
	}
}

// TestTeardownWithoutConfig: the network's config file removed after the
// pod's setup (an operator changing the node's network): the pod's stop
// must still free its IP and port mappings, from the config libcni cached
// at the ADD; a second teardown, or one of a pod never set up, has nothing
// to undo and succeeds (kubelet retries a stop until it does).
func TestTeardownWithoutConfig(t *testing.T) {
	tn := newTestNet(t, false)
	p := tn.runPod(t, SetupOptions{Namespace: "default", Name: "noconf", PortMappings: []PortMapping{
		{HostPort: int32(freePort(t)), ContainerPort: 80},
	}})
	chains := podChains(iptablesSave(t), p.id)
	if err := os.Remove(filepath.Join(tn.confDir, "10-test.conflist")); err != nil {
		t.Fatal(err)
	}
	if err := tn.Teardown(context.Background(), p.id, p.ns.Path()); err != nil {
		t.Fatalf("teardown without the config file: %v", err)
	}
	tn.checkReleased(t, p, chains)
	if err := p.ns.Remove(); err != nil { // as StopPodSandbox does after the teardown
		t.Fatal(err)
	}
	for _, id := range []string{p.id, "pod-never"} {
		if err := tn.Teardown(context.Background(), id, ""); err != nil {
			t.Errorf("teardown of %s, with nothing cached and no config: %v", id, err)
		}
	}
}

// TestTeardownWithoutNetNS is a pod whose netns went first (a crash, a
// restart after a reboot): DEL runs with no netns and still frees the IP
// and the port mappings.
//
// ipMasq is off here: the bridge plugin (1.1.1) finds the addresses whose
// masquerade rules it removes in the netns, so without one it leaves them.
func TestTeardownWithoutNetNS(t *testing.T) {
	tn := newTestNet(t, false)
	p := tn.runPod(t, SetupOptions{Namespace: "default", Name: "gone", PortMappings: []PortMapping{
		{HostPort: int32(freePort(t)), ContainerPort: 80},
	}})
	chains := podChains(iptablesSave(t), p.id)
	if len(chains) == 0 {
		t.Fatal("no port-mapping chain for the pod")
	}
	if err := p.ns.Remove(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := tn.Teardown(context.Background(), p.id, p.ns.Path()); err != nil {
			t.Fatalf("teardown: %v", err)
		}
	}
	tn.checkReleased(t, p, chains)
	// Never set up, with and without a netns path: nothing to do, no error.
	for _, path := range []string{"", filepath.Join(tn.nsDir, "never")} {
		if err := tn.Teardown(context.Background(), "pod-never", path); err != nil {
			t.Errorf("teardown of an unknown pod (netns %q): %v", path, err)
		}
	}
}

// TestTeardownAfterAnADDCutShort is a daemon killed inside a pod's ADD:
// the plugins ran (an IP leased, masquerading, a DNAT chain for the host
// port) but libcni, which caches an ADD once it all succeeded, cached
// nothing. The teardown after the restart must free all of it: the port
// mappings for portmap's DEL come from the note Setup wrote before the
// ADD. Setup and Teardown leave no note behind, nor a note's temp file.
func TestTeardownAfterAnADDCutShort(t *testing.T) {
	tn := newTestNet(t, true)
	opts := SetupOptions{Namespace: "default", Name: "cut", PortMappings: []PortMapping{{HostPort: int32(freePort(t)), ContainerPort: 80}}}
	p := tn.runPod(t, opts)
	if notes, _ := os.ReadDir(filepath.Join(tn.cacheDir, "pending")); len(notes) != 0 {
		t.Fatalf("notes left after a setup: %v", notes)
	}
	chains := podChains(iptablesSave(t), p.id)
	if len(chains) < 2 {
		t.Fatalf("want a masquerade and a port-mapping chain, have %v", chains)
	}
	// As the kill left it: the note written, libcni's cache not.
	rt, err := opts.runtimeConf(p.id, p.ns.Path())
	if err != nil {
		t.Fatal(err)
	}
	if err := tn.notePending(p.id, rt); err != nil {
		t.Fatal(err)
	}
	// And the temp file of an earlier note's write, cut short too.
	if err := os.WriteFile(filepath.Join(tn.cacheDir, "pending", "."+p.id+".tmp-123"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(tn.cacheDir, "results")); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second time is a no-op
		if err := tn.Teardown(context.Background(), p.id, p.ns.Path()); err != nil {
			t.Fatalf("teardown: %v", err)
		}
	}
	tn.checkReleased(t, p, chains)
	if notes, _ := os.ReadDir(filepath.Join(tn.cacheDir, "pending")); len(notes) != 0 {
		t.Fatalf("notes left after the teardown: %v", notes)
	}
}

// TestTeardownAfterAnADDCutBeforeMasquerade is a daemon killed inside the
// bridge plugin's ADD after the pod's interface and IP lease, before its
// masquerade chain. The plugin's DEL then fails on the chain it never made
// (iptables-nft answers a missing jump target with exit status 2, which
// the plugin does not take for "does not exist"), having released the
// rest; the teardown must still end with nothing of the pod left.
func TestTeardownAfterAnADDCutBeforeMasquerade(t *testing.T) {
	tn := newTestNet(t, true)
	opts := SetupOptions{Namespace: "default", Name: "cut-masq"}
	p := tn.runPod(t, opts)
	chains := podChains(iptablesSave(t), p.id)
	if len(chains) != 1 {
		t.Fatalf("want the masquerade chain only, have %v", chains)
	}
	// As the kill left it: no masquerade rule or chain, the note written,
	// libcni's cache not.
	for _, args := range [][]string{
		{"-t", "nat", "-D", "POSTROUTING", "-s", p.ip().String(), "-j", chains[0], "-m", "comment", "--comment", fmt.Sprintf("name: %q id: %q", tn.name, p.id)},
		{"-t", "nat", "-F", chains[0]},
		{"-t", "nat", "-X", chains[0]},
	} {
		if out, err := exec.Command("iptables", append(args, "--wait")...).CombinedOutput(); err != nil {
			t.Fatalf("iptables %v: %v: %s", args, err, out)
		}
	}
	rt, err := opts.runtimeConf(p.id, p.ns.Path())
	if err != nil {
		t.Fatal(err)
	}
	if err := tn.notePending(p.id, rt); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(tn.cacheDir, "results")); err != nil {
		t.Fatal(err)
	}
	if err := tn.Teardown(context.Background(), p.id, p.ns.Path()); err != nil {
		t.Fatalf("teardown: %v", err)
	}
	tn.checkReleased(t, p, chains)
	if notes, _ := os.ReadDir(filepath.Join(tn.cacheDir, "pending")); len(notes) != 0 {
		t.Fatalf("notes left after the teardown: %v", notes)
	}
}
