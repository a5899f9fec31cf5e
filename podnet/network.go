package podnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/sirupsen/logrus"
)

// podInterface is the pod's interface name, as kubelet and containerd use.
const podInterface = "eth0"

// Config says where the CNI plugins and network configs are.
type Config struct {
	PluginDirs []string      // plugin binaries; default DefaultPluginDir
	ConfDir    string        // network configs; default DefaultConfDir
	CacheDir   string        // libcni's record of each ADD, read back on DEL; default /var/lib/cni
	Logger     *logrus.Entry // for what a caller's error does not carry (a DEL run again); default logrus's standard logger
}

// Network plugs pods into the node's pod network through CNI. It keeps no
// state between calls: the config dir is read again on every call, so a
// config dropped in by a network add-on after the daemon started is used
// at once. It is safe for concurrent use; the plugins lock their own state.
type Network struct {
	confDir  string
	cacheDir string // libcni's, and the args of ADDs under way (pending.go)
	cni      *libcni.CNIConfig
	lo       *libcni.NetworkConfigList
	log      *logrus.Entry
}

// NewNetwork returns a Network; it does not require a config yet (see Status).
func NewNetwork(c Config) (*Network, error) {
	if len(c.PluginDirs) == 0 {
		c.PluginDirs = []string{DefaultPluginDir}
	}
	if c.ConfDir == "" {
		c.ConfDir = DefaultConfDir
	}
	if c.CacheDir == "" {
		c.CacheDir = libcni.CacheDir
	}
	if c.Logger == nil {
		c.Logger = logrus.NewEntry(logrus.StandardLogger())
	}
	lo, err := libcni.NetworkConfFromBytes([]byte(loopbackConfig))
	if err != nil {
		return nil, fmt.Errorf("loopback config: %w", err)
	}
	exec := pluginExec{&invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: os.Stderr}}} // its own ExecPlugin (exec.go)
	return &Network{
		confDir:  c.ConfDir,
		cacheDir: c.CacheDir,
		cni:      libcni.NewCNIConfigWithCacheDir(c.PluginDirs, c.CacheDir, exec),
		lo:       lo,
		log:      c.Logger,
	}, nil
}

// Status is nil when pods can be networked: a config is found and every
// plugin it names (and loopback) is installed. Otherwise its error is the
// reason CRI's NetworkReady is false.
func (n *Network) Status() error {
	list, err := loadConfig(n.confDir)
	if err != nil {
		return err
	}
	for _, l := range []*libcni.NetworkConfigList{n.lo, list} {
		for _, p := range l.Plugins {
			if _, err := invoke.FindInPath(p.Network.Type, n.cni.Path); err != nil {
				return fmt.Errorf("network %q: plugin %q not found in %s: %w",
					l.Name, p.Network.Type, strings.Join(n.cni.Path, ":"), errdefs.ErrFailedPrecondition)
			}
		}
	}
	return nil
}

// Result is what Setup made: the pod's addresses on its interface.
type Result struct {
	IPs       []net.IP
	Interface string
}

// Setup plugs the pod's namespace into lo and the pod network (CNI ADD of
// both). podID is the sandbox ID: CNI's container ID, the key of the
// plugins' state and of Teardown. On failure, what was set up is torn down.
func (n *Network) Setup(ctx context.Context, podID, netnsPath string, opts SetupOptions) (Result, error) {
	if podID == "" || netnsPath == "" {
		return Result{}, fmt.Errorf("pod network setup needs a pod ID and a netns: %w", errdefs.ErrInvalidArgument)
	}
	rt, err := opts.runtimeConf(podID, netnsPath)
	if err != nil {
		return Result{}, err
	}
	list, err := loadConfig(n.confDir)
	if err != nil {
		return Result{}, err
	}
	if err := n.notePending(podID, rt); err != nil {
		return Result{}, fmt.Errorf("pod %s network setup: %w", podID, err)
	}
	res, err := n.add(ctx, list, rt)
	if err != nil {
		// Best effort: the error to return is the ADD's.
		_ = n.teardown(ctx, list, podID, netnsPath)
		return Result{}, fmt.Errorf("pod %s network setup: %w", podID, err)
	}
	// libcni cached the ADD: its cache is what the DEL reads from now on
	// (a note left by a failed removal is dropped by the teardown).
	_ = n.dropPending(podID)
	return res, nil
}

func (n *Network) add(ctx context.Context, list *libcni.NetworkConfigList, rt *libcni.RuntimeConf) (Result, error) {
	loRT := *rt
	loRT.IfName = "lo"
	if _, err := n.cni.AddNetworkList(ctx, n.lo, &loRT); err != nil {
		return Result{}, err
	}
	r, err := n.cni.AddNetworkList(ctx, list, rt)
	if err != nil {
		return Result{}, err
	}
	cur, err := types100.NewResultFromResult(r)
	if err != nil {
		return Result{}, fmt.Errorf("network %q result: %w", list.Name, err)
	}
	return podResult(cur), nil
}

// podResult keeps the addresses on the pod's side: a result also lists the
// host's bridge and veth, which are no business of the pod's.
func podResult(r *types100.Result) Result {
	res := Result{Interface: podInterface}
	for _, ip := range r.IPs {
		if ip.Interface != nil && *ip.Interface < len(r.Interfaces) {
			iface := r.Interfaces[*ip.Interface]
			if iface.Sandbox == "" {
				continue
			}
			res.Interface = iface.Name
		}
		res.IPs = append(res.IPs, ip.Address.IP)
	}
	return res
}

// Teardown unplugs the pod (CNI DEL, pod network then lo). It is
// idempotent and works when the namespace is gone: DEL then gets no netns,
// as CNI allows, and the plugins release what they hold outside it (the
// IP address, port mappings). Call it before removing the netns: the
// bridge plugin removes its ipMasq rules only when it can see the pod's
// addresses in the netns.
func (n *Network) Teardown(ctx context.Context, podID, netnsPath string) error {
	if podID == "" {
		return fmt.Errorf("pod network teardown needs a pod ID: %w", errdefs.ErrInvalidArgument)
	}
	cached, err := n.cachedConfig(podID)
	if err != nil {
		return fmt.Errorf("pod %s network teardown: its cached config: %w", podID, err)
	}
	noted, err := n.pending(podID)
	if err != nil {
		return fmt.Errorf("pod %s network teardown: %w", podID, err)
	}
	if cached == nil && noted == nil && !exists(netnsPath) {
		// No ADD finished (libcni caches each one and drops the cache at
		// the DEL), none was cut short (its note is left) and no namespace
		// is left: down already. A StopPodSandbox kubelet repeats costs no
		// plugin run.
		return nil
	}
	list, err := loadConfig(n.confDir)
	if err != nil {
		// The config was removed or broken since the pod's ADD: DEL needs
		// only what libcni cached then. Nothing cached means no ADD to
		// undo (never set up, or torn down already).
		if cached == nil {
			// An ADD that did not finish (a crash inside it): the plugins
			// may hold a lease that only the config can free.
			return fmt.Errorf("pod %s network teardown: %w", podID, err)
		}
		list = cached
	}
	if err := n.teardown(ctx, list, podID, netnsPath); err != nil {
		return fmt.Errorf("pod %s network teardown: %w", podID, err)
	}
	return n.dropPending(podID)
}

func exists(path string) bool {
	if path == "" {
		return false
	}
	_, err := os.Lstat(path)
	return err == nil
}

// cachedConfig is the network config libcni cached at the pod's ADD of its
// pod interface; nil when there is none.
func (n *Network) cachedConfig(podID string) (*libcni.NetworkConfigList, error) {
	atts, err := n.cni.GetCachedAttachments(podID)
	if err != nil {
		return nil, err
	}
	for _, a := range atts {
		if a.IfName != podInterface {
			continue
		}
		return libcni.NetworkConfFromBytes(a.Config)
	}
	return nil, nil
}

func (n *Network) teardown(ctx context.Context, list *libcni.NetworkConfigList, podID, netnsPath string) error {
	if _, err := OpenNetNS(netnsPath); errors.Is(err, errdefs.ErrNotFound) {
		netnsPath = ""
	}
	rt := &libcni.RuntimeConf{ContainerID: podID, NetNS: netnsPath, IfName: podInterface}
	// DEL must see what ADD saw: the port mappings and args cached at ADD,
	// and the config as it was then, if the file was edited since.
	if conf, cached, err := n.cni.GetNetworkListCachedConfig(list, rt); err == nil && cached != nil {
		if l, err := libcni.NetworkConfFromBytes(conf); err == nil && len(l.Plugins) > 0 {
			list = l
		}
		rt.Args, rt.CapabilityArgs = cached.Args, cached.CapabilityArgs
	} else if noted, err := n.pending(podID); err == nil && noted != nil {
		rt.Args, rt.CapabilityArgs = noted.Args, noted.CapabilityArgs // an ADD cut short
	}
	if err := n.delRetried(ctx, list, rt); err != nil {
		return err
	}
	loRT := *rt
	loRT.IfName = "lo"
	return n.cni.DelNetworkList(ctx, n.lo, &loRT)
}

// delAttempts bounds the DELs of one teardown. CNI wants DEL idempotent,
// and plugins release what they hold one after another, so a DEL that
// failed halfway has less left to do the next time. The bridge plugin
// needs it: after an ADD cut short before its masquerade chain, its DEL
// unplugs the pod and frees the IP, then fails removing a jump to the
// chain never made (iptables-nft says so with an exit status the plugin
// does not take for "does not exist"); the next DEL finds no interface,
// hence no address to unmasquerade, and succeeds.
const delAttempts = 3

// delRetried runs the DEL of list until it succeeds, delAttempts times at
// most; the error is the last attempt's.
func (n *Network) delRetried(ctx context.Context, list *libcni.NetworkConfigList, rt *libcni.RuntimeConf) error {
	var err error
	for attempt := 1; attempt <= delAttempts; attempt++ {
		if err = n.cni.DelNetworkList(ctx, list, rt); err == nil || ctx.Err() != nil {
			return err
		}
		if attempt < delAttempts {
			n.log.WithError(err).WithField("sandbox", rt.ContainerID).Warnf("cni: DEL failed (attempt %d of %d); running it again", attempt, delAttempts)
		}
	}
	return fmt.Errorf("CNI DEL failed %d times: %w", delAttempts, err)
}
