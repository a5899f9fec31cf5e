package imagesvc

import (
	"fmt"
	"slices"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/image"
	"github.com/google/go-containerregistry/pkg/name"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Matches reports whether img passes a ListImages filter. A nil filter, or
// one without an image name, passes every image. A name passes the image it
// names as the store's Get would find it: its ID ("sha256:<hex>", the bare
// hex or a prefix of it), or a reference that normalizes to one of its
// RepoTags or RepoDigests ("busybox" is docker.io/library/busybox:latest).
// A prefix shared by several images passes each of them.
func Matches(img image.Image, filter *runtimeapi.ImageFilter) bool {
	want := filter.GetImage().GetImage()
	if want == "" {
		return true
	}
	if hex, ok := idHex(want); ok && strings.HasPrefix(img.ID, "sha256:"+hex) {
		return true
	}
	canonical, err := normalize(want)
	if err != nil {
		return false
	}
	return slices.Contains(img.RepoTags, canonical) || slices.Contains(img.RepoDigests, canonical)
}

// idHex returns the hex part of an ID or ID prefix: "sha256:<hex>" or
// "<hex>", up to 64 lowercase hex digits.
func idHex(s string) (string, bool) {
	hex := strings.TrimPrefix(s, "sha256:")
	return hex, hex != "" && len(hex) <= 64 && strings.Trim(hex, "0123456789abcdef") == ""
}

// normalize writes a reference as the store records names: the registry
// host as kubelet writes it ("docker.io", not go-containerregistry's
// "index.docker.io"), the repository, then ":tag" (latest if none) or
// "@digest".
func normalize(ref string) (string, error) {
	n, err := name.ParseReference(ref)
	if err != nil {
		return "", err
	}
	host := n.Context().RegistryStr()
	if host == name.DefaultRegistry {
		host = "docker.io"
	}
	repo := host + "/" + n.Context().RepositoryStr()
	if d, ok := n.(name.Digest); ok {
		return repo + "@" + d.DigestStr(), nil
	}
	return repo + ":" + n.Identifier(), nil
}

// checkRef refuses what cannot name an image: an empty string, or one that
// is neither an ID (or ID prefix) nor a valid reference. A request naming a
// well-formed image the store lacks is not refused here: ImageStatus answers
// it with no image, RemoveImage with success.
func checkRef(ref string) error {
	if ref == "" {
		return fmt.Errorf("no image named (ImageSpec.image is empty): %w", errdefs.ErrInvalidArgument)
	}
	if _, ok := idHex(ref); ok {
		return nil
	}
	if _, err := name.ParseReference(ref); err != nil {
		return fmt.Errorf("image %q is neither an image ID nor a valid reference: %w: %w", ref, errdefs.ErrInvalidArgument, err)
	}
	return nil
}
