package imagesvc_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/cri/imagesvc"
	"github.com/evjournal/containerd/image"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestMatches(t *testing.T) {
	hex := strings.Repeat("ab", 32)
	busybox := image.Image{
		ID:          "sha256:" + hex,
		RepoTags:    []string{"docker.io/library/busybox:1.29", "docker.io/library/busybox:latest", "registry.k8s.io/pause:3.10"},
		RepoDigests: []string{"docker.io/library/busybox@sha256:" + strings.Repeat("cd", 32)},
	}
	for _, tc := range []struct {
		filter string
		want   bool
	}{
		{"", true},
		{"busybox", true},
		{"busybox:1.29", true},
		{"library/busybox:1.29", true},
		{"docker.io/library/busybox:1.29", true},
		{"index.docker.io/library/busybox:1.29", true},
		{"registry.k8s.io/pause:3.10", true},
		{"busybox@sha256:" + strings.Repeat("cd", 32), true},
		{"sha256:" + hex, true},
		{hex, true},
		{hex[:12], true},
		{"sha256:" + hex[:12], true},
		{"busybox:1.30", false},
		{"pause:3.10", false}, // docker.io/library/pause, another repository
		{"registry.k8s.io/pause", false},
		{"busybox@sha256:" + strings.Repeat("ef", 32), false},
		{"sha256:" + strings.Repeat("0", 64), false},
		{"abd", false},
		{"Upper/Case:1", false},
	} {
		f := &runtimeapi.ImageFilter{Image: &runtimeapi.ImageSpec{Image: tc.filter}}
		if got := imagesvc.Matches(busybox, f); got != tc.want {
			t.Errorf("Matches(%q) = %v, want %v", tc.filter, got, tc.want)
		}
	}
	if !imagesvc.Matches(busybox, nil) || !imagesvc.Matches(busybox, &runtimeapi.ImageFilter{}) {
		t.Error("no filter must match every image")
	}
}

func TestToStatus(t *testing.T) {
	if imagesvc.ToStatus(nil) != nil {
		t.Fatal("ToStatus(nil) is not nil")
	}
	for _, tc := range []struct {
		err  error
		code codes.Code
	}{
		{fmt.Errorf("image %q: %w", "x", errdefs.ErrNotFound), codes.NotFound},
		{fmt.Errorf("bad: %w", errdefs.ErrInvalidArgument), codes.InvalidArgument},
		{fmt.Errorf("pull: %w", errdefs.ErrUnauthenticated), codes.Unauthenticated},
		{fmt.Errorf("pull: %w", errdefs.ErrPermissionDenied), codes.PermissionDenied},
		{fmt.Errorf("remove: %w", image.ErrInUse), codes.FailedPrecondition},
		{fmt.Errorf("pull: %w", errdefs.ErrUnavailable), codes.Unavailable},
		{fmt.Errorf("pull: %w", errdefs.ErrDataLoss), codes.DataLoss},
		{fmt.Errorf("pull: %w", context.DeadlineExceeded), codes.DeadlineExceeded},
		{fmt.Errorf("pull: %w", context.Canceled), codes.Canceled},
		{fmt.Errorf("x: %w", status.Error(codes.Aborted, "inner")), codes.Aborted},
		{errors.New("disk on fire"), codes.Internal},
		// A raw OS error is the daemon's failure, not a missing image.
		{fmt.Errorf("read record: %w", fs.ErrNotExist), codes.Internal},
	} {
		err := imagesvc.ToStatus(tc.err)
		st, ok := status.FromError(err)
		if !ok || st.Code() != tc.code || st.Message() != tc.err.Error() {
			t.Errorf("ToStatus(%v) = %v, want code %s and the same text", tc.err, err, tc.code)
		}
	}
}
