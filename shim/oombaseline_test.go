package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestMemoryCgroupPaths(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		v1, v2     string
		inV1, inV2 bool
	}{
		{"hybrid", "12:pids:/a\n4:cpu,memory:/docker/x\n1:name=systemd:/s\n0::/u\n", "/docker/x", "/u", true, true},
		{"v2 only", "0::/kubepods/p1\n", "", "/kubepods/p1", false, true},
		{"v1 without memory", "3:cpu:/c\n", "", "", false, false},
		{"garbage", "nonsense\n5:\n", "", "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v1, v2, inV1, inV2 := memoryCgroupPaths([]byte(tc.data))
			if v1 != tc.v1 || v2 != tc.v2 || inV1 != tc.inV1 || inV2 != tc.inV2 {
				t.Fatalf("got %q %q %v %v, want %q %q %v %v", v1, v2, inV1, inV2, tc.v1, tc.v2, tc.inV1, tc.inV2)
			}
		})
	}
}

func TestParseMountinfoLine(t *testing.T) {
	line := `35 25 0:30 /sub /sys/fs/cgroup/my\040mem rw,nosuid shared:12 - cgroup cgroup rw,memory`
	root, mp, fstype, super, ok := parseMountinfoLine(line)
	if !ok || root != "/sub" || mp != "/sys/fs/cgroup/my mem" || fstype != "cgroup" || super != "rw,memory" {
		t.Fatalf("got %q %q %q %q %v", root, mp, fstype, super, ok)
	}
	if _, _, _, _, ok := parseMountinfoLine("35 25 0:30 / /x rw"); ok {
		t.Fatal("a line without the separator parsed")
	}
	if got := underRoot("/sub", "/m", "/other"); got != "" {
		t.Fatalf("a cgroup outside the mount's root resolved to %q", got)
	}
	if got := underRoot("/sub", "/m", "/sub/c"); got != "/m/c" {
		t.Fatalf("underRoot = %q, want /m/c", got)
	}
}

// TestRecordOOMBaselineOwnCgroup: for this test's own process the shim's
// lookup finds the memory counter files of its cgroups, and records those
// that exist (a v2 hierarchy without the memory controller has none).
func TestRecordOOMBaselineOwnCgroup(t *testing.T) {
	var files []string
	for _, f := range memoryCounterFiles(os.Getpid()) {
		if _, err := os.Stat(f); err == nil {
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		if _, err := os.Stat("/sys/fs/cgroup/memory/memory.oom_control"); err == nil {
			t.Fatal("the v1 memory hierarchy is mounted, but no counter file was found for this process")
		}
		t.Skip("no memory cgroup with an OOM counter on this machine")
	}
	t.Chdir(t.TempDir())
	if err := recordOOMBaseline(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(oomBaselineFile)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for line := range strings.Lines(string(data)) {
		file, _, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || !filepath.IsAbs(file) {
			t.Fatalf("bad line %q in %s", line, oomBaselineFile)
		}
		got = append(got, file)
	}
	if !reflect.DeepEqual(got, files) {
		t.Fatalf("%s names %v, want %v", oomBaselineFile, got, files)
	}
}

func TestStartOnlyForACreatedInit(t *testing.T) {
	for _, cfg := range []string{
		`{"exec":true,"process":{"args":["x"]},"start":true}`,
		`{"checkpoint":"/c","start":true}`,
	} {
		if _, err := parseConfig([]byte(cfg)); err == nil || !strings.Contains(err.Error(), `"start" is for a created init only`) {
			t.Errorf("parseConfig(%s) = %v, want the start refusal", cfg, err)
		}
	}
	c, err := parseConfig([]byte(`{"start":true}`))
	if err != nil || !c.Start {
		t.Fatalf("parseConfig start: %+v, %v", c, err)
	}
}
