package imagesvc

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/evjournal/containerd/image"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// toCRI is the CRI view of a store image. Its id is the image ID, the config
// digest: the value PullImage returns as image_ref and the runtime side
// reports as a container's image_id, as CRI requires since v1.36.
func toCRI(img image.Image) *runtimeapi.Image {
	uid, username := userOf(img.Config.User)
	return &runtimeapi.Image{
		Id:          img.ID,
		RepoTags:    img.RepoTags,
		RepoDigests: img.RepoDigests,
		// CRI wants a size > 0; an image of empty files only counts 1.
		Size:     max(img.Size, 1),
		Uid:      uid,
		Username: username,
		Spec:     &runtimeapi.ImageSpec{Image: img.ID},
		Pinned:   false,
	}
}

// userOf splits an image config's User as CRI's Image wants it: the user
// part of "user[:group]" is a uid when it is a number, else a username.
// kubelet's runAsNonRoot check reads these; an empty User gives neither
// (the runtime runs the image as root).
func userOf(user string) (*runtimeapi.Int64Value, string) {
	name, _, _ := strings.Cut(user, ":")
	if name == "" {
		return nil, ""
	}
	if uid, err := strconv.ParseUint(name, 10, 32); err == nil {
		return &runtimeapi.Int64Value{Value: int64(uid)}, ""
	}
	return nil, name
}

// authOf is the store's form of a request's credentials; nil for none.
func authOf(a *runtimeapi.AuthConfig) *image.Auth {
	if a == nil {
		return nil
	}
	return &image.Auth{
		Username: a.Username, Password: a.Password, Auth: a.Auth,
		IdentityToken: a.IdentityToken, RegistryToken: a.RegistryToken,
		ServerAddress: a.ServerAddress,
	}
}

// verboseInfo is ImageStatus's info map when verbose: under "info", the
// store's record as JSON (ID, names, size, chain ids and the OCI config:
// user, env, entrypoint, cmd, working dir, labels...).
func verboseInfo(img image.Image) (map[string]string, error) {
	b, err := json.Marshal(img)
	if err != nil {
		return nil, fmt.Errorf("image %s: verbose info: %w", img.ID, err)
	}
	return map[string]string{"info": string(b)}, nil
}
