package server

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/internal/atomicfile"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// UpdateRuntimeConfig: kubelet sends the node's pod CIDR (from the Node
// object, once it is assigned). As containerd's CRI plugin does, the
// daemon writes the pods' CNI config from a template (--cni-conf-template)
// with that CIDR when no CNI config is loaded yet; without a template it
// waits for a network add-on to drop one in the conf dir, and a loaded
// config is never replaced.

// CNIConfFile is the config UpdateRuntimeConfig writes from the template,
// in the CNI conf dir: containerd's name, so that an add-on or a tool that
// knows containerd's file knows this one.
const CNIConfFile = "10-containerd-net.conflist"

// cniTemplateData is what a CNI config template is given, as containerd
// gives it: the first CIDR, all of them, and a default route per family.
type cniTemplateData struct {
	PodCIDR       string
	PodCIDRRanges []string
	Routes        []string
}

// ParseCNIConfTemplate reads a --cni-conf-template file: an error names
// what is wrong with it, at start rather than when kubelet sends the CIDR.
func ParseCNIConfTemplate(path string) (*template.Template, error) {
	t, err := template.ParseFiles(path)
	if err != nil {
		return nil, fmt.Errorf("CNI config template: %w", err)
	}
	return t, nil
}

func (s *Server) UpdateRuntimeConfig(ctx context.Context, r *runtimeapi.UpdateRuntimeConfigRequest) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	cidrs, err := podCIDRs(r.GetRuntimeConfig().GetNetworkConfig().GetPodCidr())
	if err != nil {
		return nil, toStatus(err)
	}
	if len(cidrs) == 0 {
		return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
	}
	log := s.log.WithField("podCIDR", strings.Join(cidrs, ","))
	switch {
	case s.cfg.CNIConfTemplate == nil:
		log.Info("cri: pod CIDR received; no CNI config template (--cni-conf-template): a network add-on is to write the CNI config")
		return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
	case s.cfg.Network != nil && s.cfg.Network.Status() == nil:
		log.Info("cri: pod CIDR received; a CNI config is loaded already: the template is not used")
		return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
	}
	path, err := s.writeCNIConfig(cidrs)
	if err != nil {
		return nil, toStatus(err)
	}
	log.WithField("file", path).Info("cri: the pods' CNI config written from the template")
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
}

// podCIDRs reads the comma-separated CIDRs kubelet sends (one per family
// on a dual-stack node); a malformed one is InvalidArgument.
func podCIDRs(v string) ([]string, error) {
	var out []string
	for _, c := range strings.Split(v, ",") {
		if c = strings.TrimSpace(c); c == "" {
			continue
		}
		if _, _, err := net.ParseCIDR(c); err != nil {
			return nil, fmt.Errorf("pod CIDR %q: %w: %w", c, err, errdefs.ErrInvalidArgument)
		}
		out = append(out, c)
	}
	return out, nil
}

// writeCNIConfig renders the template into the conf dir, atomically (the
// network reads the dir at every call and must not see half a file).
func (s *Server) writeCNIConfig(cidrs []string) (string, error) {
	data := cniTemplateData{PodCIDR: cidrs[0], PodCIDRRanges: cidrs}
	var v4, v6 bool
	for _, c := range cidrs {
		ip, _, _ := net.ParseCIDR(c)
		if ip.To4() != nil {
			v4 = true
		} else {
			v6 = true
		}
	}
	if v4 {
		data.Routes = append(data.Routes, "0.0.0.0/0")
	}
	if v6 {
		data.Routes = append(data.Routes, "::/0")
	}
	var b bytes.Buffer
	if err := s.cfg.CNIConfTemplate.Execute(&b, data); err != nil {
		return "", fmt.Errorf("CNI config template: %w", err)
	}
	if err := os.MkdirAll(s.cfg.CNIConfDir, 0o755); err != nil {
		return "", fmt.Errorf("CNI conf dir: %w", err)
	}
	path := filepath.Join(s.cfg.CNIConfDir, CNIConfFile)
	if err := atomicfile.Write(path, b.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("write the CNI config: %w", err)
	}
	return path, nil
}
