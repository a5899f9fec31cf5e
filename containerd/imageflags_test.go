package main

import (
	"strings"
	"testing"
	"time"

	"github.com/evjournal/containerd/image"
)

// TestImageFlags: the pull bounds reach the image store's limits; 0 turns
// the progress timeout off; values no pull could work with are refused at
// start, naming the flag.
func TestImageFlags(t *testing.T) {
	cfg, err := parseFlags("--image-max-size", "512MiB", "--image-max-decompression-ratio", "20",
		"--image-pull-progress-timeout", "15s", "--max-concurrent-downloads", "5")
	if err != nil {
		t.Fatal(err)
	}
	want := image.Limits{MaxImageSize: 512 << 20, MaxDecompressionRatio: 20, ProgressTimeout: 15 * time.Second, MaxConcurrentDownloads: 5}
	if cfg.cri.limits != want {
		t.Errorf("limits %+v, want %+v", cfg.cri.limits, want)
	}
	if cfg, err = parseFlags("--image-pull-progress-timeout", "0"); err != nil || cfg.cri.limits.ProgressTimeout >= 0 {
		t.Errorf("a progress timeout of 0: %+v, %v; want none (negative)", cfg.cri.limits, err)
	}
	for _, bad := range [][]string{
		{"--image-max-size", "lots"}, {"--image-max-size", "0"}, {"--image-max-decompression-ratio", "0"},
		{"--image-pull-progress-timeout", "-1s"}, {"--max-concurrent-downloads", "0"},
	} {
		if _, err := parseFlags(bad...); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%v: %v, want an error naming the flag", bad, err)
		}
	}
}
