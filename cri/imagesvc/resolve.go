package imagesvc

import (
	"fmt"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/image"
)

// ResolveForContainer finds the image a CreateContainer request names in
// ContainerConfig.image.image: kubelet passes the image_ref PullImage
// returned (the image ID, "sha256:<hex>"); other clients (crictl, critest)
// may pass a reference ("busybox:1.29", "repo@sha256:...") or a short ID.
// The runtime does not pull: an image the store lacks is a NotFound error
// saying so, an empty or malformed name an InvalidArgument one.
func ResolveForContainer(store *image.Store, ref string) (image.Image, error) {
	if err := checkRef(ref); err != nil {
		return image.Image{}, err
	}
	img, err := store.Get(ref)
	if errdefs.IsNotFound(err) {
		return image.Image{}, fmt.Errorf("image %q is not present on this node (pull it first): %w", ref, errdefs.ErrNotFound)
	}
	return img, err
}
