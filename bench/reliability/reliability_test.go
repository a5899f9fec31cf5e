package reliability_test

import (
	"strings"
	"testing"

	"github.com/evjournal/containerd/bench/reliability"
	"github.com/evjournal/containerd/integration/fixture"
)

func TestMain(m *testing.M) { fixture.Main(m) }

// TestReliabilityShort is the CI mode of `make reliability`: every check of
// the suite with sizes that keep it well under 2 minutes (smaller still
// with -short). The figures are logged; any violation fails the test.
func TestReliabilityShort(t *testing.T) {
	fixture.RequireRoot(t)
	for env, path := range map[string]string{
		"CONTAINERD": fixture.Containerd(t), "SHIM": fixture.Shim(t), "RUNC": fixture.Runc(t),
		"TESTINIT": fixture.Testinit(t), "CTR": fixture.Ctr(t), "PAUSE": fixture.Pause(t),
	} {
		t.Setenv(env, path)
	}
	cfg := reliability.Short()
	if testing.Short() {
		cfg.ChaosKills, cfg.TornStride, cfg.CompactKills, cfg.LeakCycles, cfg.CRIKills = 2, 41, 1, 40, 2
	}
	var out strings.Builder
	cfg.Out = &out
	cfg.Logf = t.Logf
	s := reliability.Run(cfg)
	t.Logf("figures:\n%s", out.String())
	for _, f := range s.Failures {
		t.Error(f)
	}
}
