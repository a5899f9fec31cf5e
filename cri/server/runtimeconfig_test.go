package server

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func (e *env) updateRuntimeConfig(cidr string) error {
	_, err := e.srv.UpdateRuntimeConfig(context.Background(), &runtimeapi.UpdateRuntimeConfigRequest{
		RuntimeConfig: &runtimeapi.RuntimeConfig{NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: cidr}}})
	return err
}

// TestUpdateRuntimeConfig: with a template, the pod CIDR kubelet sends is
// written into the pods' CNI config while none is loaded (the first CIDR,
// all of them, a default route per family), and never over a loaded one;
// without a template nothing is written; an empty CIDR is accepted, a
// malformed one is InvalidArgument.
func TestUpdateRuntimeConfig(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	tmplPath := filepath.Join(dir, "tmpl")
	if err := os.WriteFile(tmplPath, []byte(`{{.PodCIDR}}|{{range .PodCIDRRanges}}{{.}};{{end}}|{{range .Routes}}{{.}};{{end}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "net.d")
	written := filepath.Join(conf, CNIConfFile)

	e.srv.Close()
	e.cfg.CNIConfDir = conf
	e.start()
	if err := e.updateRuntimeConfig("10.9.0.0/24"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(written); !os.IsNotExist(err) {
		t.Fatalf("without a template a config was written (%v)", err)
	}

	tmpl, err := ParseCNIConfTemplate(tmplPath)
	if err != nil {
		t.Fatal(err)
	}
	e.srv.Close()
	e.cfg.CNIConfTemplate = tmpl
	e.start()
	e.f.set("Status", failWith(errInjected)) // no config loaded
	if err := e.updateRuntimeConfig(""); err != nil {
		t.Fatal(err)
	}
	if err := e.updateRuntimeConfig("10.9.0.0/24, fd00:1::/64"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(written)
	if want := "10.9.0.0/24|10.9.0.0/24;fd00:1::/64;|0.0.0.0/0;::/0;"; err != nil || string(got) != want {
		t.Fatalf("the written config %q (%v), want %q", got, err, want)
	}
	e.f.set("Status", nil) // now loaded: left alone
	if err := e.updateRuntimeConfig("10.8.0.0/24"); err != nil {
		t.Fatal(err)
	}
	if got2, _ := os.ReadFile(written); string(got2) != string(got) {
		t.Fatalf("a loaded config was rewritten: %q", got2)
	}
	wantCode(t, e.updateRuntimeConfig("10.9.0.0/33"), codes.InvalidArgument, "10.9.0.0/33")
	if _, err := ParseCNIConfTemplate(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing template is taken")
	}
}
