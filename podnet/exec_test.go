package podnet

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestPluginDiesWithTheDaemon: a daemon killed while a plugin runs takes
// the plugin with it. A plugin that went on would finish its ADD after the
// restarted daemon had torn the pod down (its iptables rules and lease
// made for a pod that no longer exists). The "daemon" is this test binary
// again, running Setup with a loopback plugin that never returns.
func TestPluginDiesWithTheDaemon(t *testing.T) {
	if dir := os.Getenv("PODNET_TEST_DAEMON"); dir != "" {
		n, err := NewNetwork(Config{PluginDirs: []string{dir}, ConfDir: dir, CacheDir: filepath.Join(dir, "cache")})
		if err == nil {
			_, err = n.Setup(context.Background(), "pod-1", filepath.Join(dir, "netns"), SetupOptions{})
		}
		fmt.Println(err)
		os.Exit(1)
	}
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "plugin.pid")
	plugin := fmt.Sprintf("#!/bin/sh\necho $$ > %s.tmp && mv %s.tmp %s\nexec sleep 60\n", pidFile, pidFile, pidFile)
	conf := `{"cniVersion": "1.0.0", "name": "t", "plugins": [{"type": "loopback"}]}`
	for name, body := range map[string]string{"loopback": plugin, "10-t.conflist": conf} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	daemon := exec.Command(os.Args[0], "-test.run=^TestPluginDiesWithTheDaemon$")
	daemon.Env = append(os.Environ(), "PODNET_TEST_DAEMON="+dir)
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	pid := waitPidFile(t, pidFile)
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	daemon.Process.Kill()
	daemon.Wait()
	if n, _ := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 5000); n != 1 {
		unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		t.Fatalf("the plugin (pid %d) outlived its daemon by 5 s", pid)
	}
}

// waitPidFile waits for the plugin to say it runs: no event tells.
func waitPidFile(t *testing.T, path string) int {
	deadline := time.Now().Add(20 * time.Second)
	for {
		data, err := os.ReadFile(path)
		if err == nil {
			pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatal("the plugin did not start within 20 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
