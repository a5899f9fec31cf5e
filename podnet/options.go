package podnet

import (
	"fmt"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/containernetworking/cni/libcni"
)

// SetupOptions describe the pod to the plugins.
type SetupOptions struct {
	// Namespace, Name and UID of the pod, passed as the K8S_POD_* CNI args
	// that kubelet-era plugins (and their IPAMs) key on.
	Namespace, Name, UID string
	// Annotations of the pod, for plugins that declare the
	// "io.kubernetes.cri.pod-annotations" capability.
	Annotations map[string]string
	// PortMappings for the portmap plugin ("portMappings" capability).
	PortMappings []PortMapping
	// Bandwidth for the bandwidth plugin ("bandwidth" capability); nil for
	// no limit.
	Bandwidth *Bandwidth
}

// PortMapping forwards HostIP:HostPort on the node to ContainerPort in the
// pod. Protocol is tcp (default), udp or sctp, in any case. A mapping with
// no HostPort is skipped, as kubelet means it only as documentation.
type PortMapping struct {
	HostPort      int32
	ContainerPort int32
	Protocol      string
	HostIP        string
}

// Bandwidth limits the pod's traffic; rates in bits per second, bursts in
// bits, as the bandwidth plugin takes them. Zero means no limit that way.
type Bandwidth struct {
	IngressRate, IngressBurst uint64
	EgressRate, EgressBurst   uint64
}

// cniPortMapping is the "portMappings" capability's JSON form.
type cniPortMapping struct {
	HostPort      int32  `json:"hostPort"`
	ContainerPort int32  `json:"containerPort"`
	Protocol      string `json:"protocol"`
	HostIP        string `json:"hostIP,omitempty"`
}

// cniBandwidth is the "bandwidth" capability's JSON form.
type cniBandwidth struct {
	IngressRate  uint64 `json:"ingressRate,omitempty"`
	IngressBurst uint64 `json:"ingressBurst,omitempty"`
	EgressRate   uint64 `json:"egressRate,omitempty"`
	EgressBurst  uint64 `json:"egressBurst,omitempty"`
}

// runtimeConf is what libcni hands every plugin of the pod's network.
func (o SetupOptions) runtimeConf(podID, netnsPath string) (*libcni.RuntimeConf, error) {
	ports, err := o.portMappings()
	if err != nil {
		return nil, err
	}
	caps := map[string]any{"portMappings": ports}
	if o.Bandwidth != nil {
		b := o.Bandwidth
		caps["bandwidth"] = cniBandwidth{b.IngressRate, b.IngressBurst, b.EgressRate, b.EgressBurst}
	}
	if len(o.Annotations) > 0 {
		caps["io.kubernetes.cri.pod-annotations"] = o.Annotations
	}
	return &libcni.RuntimeConf{
		ContainerID: podID,
		NetNS:       netnsPath,
		IfName:      podInterface,
		Args: [][2]string{
			// IgnoreUnknown: plugins reject args they don't know otherwise.
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", o.Namespace},
			{"K8S_POD_NAME", o.Name},
			{"K8S_POD_INFRA_CONTAINER_ID", podID},
			{"K8S_POD_UID", o.UID},
		},
		CapabilityArgs: caps,
	}, nil
}

// portMappings validates the mappings and puts them in CNI's form. The
// list is never nil: portmap reads an absent list and an empty one alike,
// but the cached runtime config stays the same shape.
func (o SetupOptions) portMappings() ([]cniPortMapping, error) {
	out := []cniPortMapping{}
	for _, p := range o.PortMappings {
		if p.HostPort == 0 {
			continue
		}
		proto := strings.ToLower(p.Protocol)
		switch proto {
		case "":
			proto = "tcp"
		case "tcp", "udp", "sctp":
		default:
			return nil, fmt.Errorf("port mapping %d: protocol %q: %w", p.HostPort, p.Protocol, errdefs.ErrInvalidArgument)
		}
		if p.HostPort < 0 || p.HostPort > 65535 || p.ContainerPort <= 0 || p.ContainerPort > 65535 {
			return nil, fmt.Errorf("port mapping %d:%d: port out of range: %w", p.HostPort, p.ContainerPort, errdefs.ErrInvalidArgument)
		}
		out = append(out, cniPortMapping{p.HostPort, p.ContainerPort, proto, p.HostIP})
	}
	return out, nil
}
