package podnet

import (
	"net"
	"reflect"
	"testing"

	types100 "github.com/containernetworking/cni/pkg/types/100"
)

func TestRuntimeConf(t *testing.T) {
	tests := []struct {
		name      string
		opts      SetupOptions
		wantPorts []cniPortMapping
		wantCaps  []string // capability keys besides portMappings
		wantErr   bool
	}{
		{name: "none", wantPorts: []cniPortMapping{}},
		{name: "protocols", opts: SetupOptions{PortMappings: []PortMapping{
			{HostPort: 80, ContainerPort: 8080, Protocol: "TCP"},
			{HostPort: 53, ContainerPort: 53, Protocol: "udp", HostIP: "127.0.0.1"},
			{HostPort: 90, ContainerPort: 9090},
			{ContainerPort: 7000, Protocol: "TCP"}, // no host port: not mapped
		}}, wantPorts: []cniPortMapping{
			{80, 8080, "tcp", ""}, {53, 53, "udp", "127.0.0.1"}, {90, 9090, "tcp", ""},
		}},
		{name: "bad protocol", opts: SetupOptions{PortMappings: []PortMapping{{HostPort: 1, ContainerPort: 1, Protocol: "icmp"}}}, wantErr: true},
		{name: "bad port", opts: SetupOptions{PortMappings: []PortMapping{{HostPort: 70000, ContainerPort: 1}}}, wantErr: true},
		{name: "bad container port", opts: SetupOptions{PortMappings: []PortMapping{{HostPort: 80}}}, wantErr: true},
		{name: "bandwidth and annotations", opts: SetupOptions{
			Bandwidth:   &Bandwidth{IngressRate: 1e6, EgressRate: 2e6},
			Annotations: map[string]string{"a": "b"},
		}, wantPorts: []cniPortMapping{}, wantCaps: []string{"bandwidth", "io.kubernetes.cri.pod-annotations"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Namespace, tt.opts.Name, tt.opts.UID = "ns", "name", "uid"
			rt, err := tt.opts.runtimeConf("pod1", "/run/netns/pod1")
			if tt.wantErr {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rt.ContainerID != "pod1" || rt.NetNS != "/run/netns/pod1" || rt.IfName != "eth0" {
				t.Errorf("runtime conf %+v", rt)
			}
			args := map[string]string{}
			for _, a := range rt.Args {
				args[a[0]] = a[1]
			}
			wantArgs := map[string]string{"IgnoreUnknown": "1", "K8S_POD_NAMESPACE": "ns", "K8S_POD_NAME": "name",
				"K8S_POD_INFRA_CONTAINER_ID": "pod1", "K8S_POD_UID": "uid"}
			if !reflect.DeepEqual(args, wantArgs) {
				t.Errorf("args %v, want %v", args, wantArgs)
			}
			if got := rt.CapabilityArgs["portMappings"]; !reflect.DeepEqual(got, tt.wantPorts) {
				t.Errorf("port mappings %+v, want %+v", got, tt.wantPorts)
			}
			if len(rt.CapabilityArgs) != 1+len(tt.wantCaps) {
				t.Errorf("capabilities %v, want portMappings and %v", rt.CapabilityArgs, tt.wantCaps)
			}
			for _, c := range tt.wantCaps {
				if rt.CapabilityArgs[c] == nil {
					t.Errorf("no capability %s", c)
				}
			}
		})
	}
}

// TestPodResult: the host's bridge and veth addresses are not the pod's.
func TestPodResult(t *testing.T) {
	idx := func(i int) *int { return &i }
	ipn := func(s string) net.IPNet { ip, n, _ := net.ParseCIDR(s); n.IP = ip; return *n }
	r := &types100.Result{
		Interfaces: []*types100.Interface{{Name: "cni0"}, {Name: "veth1"}, {Name: "eth0", Sandbox: "/run/netns/p"}},
		IPs: []*types100.IPConfig{
			{Interface: idx(0), Address: ipn("10.1.0.1/24")},
			{Interface: idx(2), Address: ipn("10.1.0.5/24")},
			{Interface: idx(2), Address: ipn("fd00::5/64")},
		},
	}
	got := podResult(r)
	want := Result{Interface: "eth0", IPs: []net.IP{net.ParseIP("10.1.0.5").To4(), net.ParseIP("fd00::5")}}
	if got.Interface != want.Interface || len(got.IPs) != 2 || !got.IPs[0].Equal(want.IPs[0]) || !got.IPs[1].Equal(want.IPs[1]) {
		t.Fatalf("podResult = %+v, want %+v", got, want)
	}
}
