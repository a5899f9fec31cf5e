package server

import (
	"google.golang.org/protobuf/proto"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// statusImage is the image a container's status and listing report: the
// image as the user named it when kubelet says (ImageSpec's
// user_specified_image), else the spec CreateContainer was given. kubelet
// creates a container from the image's id ("sha256:..."), resolved by its
// pull, and puts the status's image into the pod's status as it is: the
// id would be what `kubectl get pod` shows and what Kubernetes' specs
// compare with the image they set (an image update of a container was
// never seen to take). containerd reports a name too (the image's first
// tag); the user's own name is the one that is right when an image has
// several.
func statusImage(spec *runtimeapi.ImageSpec) *runtimeapi.ImageSpec {
	u := spec.GetUserSpecifiedImage()
	if u == "" || u == spec.GetImage() {
		return spec
	}
	out := proto.Clone(spec).(*runtimeapi.ImageSpec)
	out.Image = u
	return out
}
