// Package imagesvc is the CRI v1 ImageService on the image store: kubelet's
// pulls, lists, status queries, removals and image filesystem usage. Errors
// of the store are classified with errdefs and become gRPC statuses here
// (ToStatus); an image is identified towards CRI by its ID, the digest of its
// config ("sha256:<hex>"), which is also what PullImage returns.
//
// The runtime side uses ResolveForContainer to find the image a
// CreateContainer names, and Matches for the image filter.
package imagesvc

import (
	"context"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/image"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Service implements runtimeapi.ImageServiceServer on an image store. It
// holds no state of its own: every call goes to the store, which is safe for
// concurrent use.
type Service struct {
	runtimeapi.UnimplementedImageServiceServer
	store  *image.Store
	pinned []string
}

var _ runtimeapi.ImageServiceServer = (*Service)(nil)

// New returns the ImageService of store. The images pinned names (the
// sandbox image) are reported pinned, so that kubelet's image garbage
// collection leaves them.
func New(store *image.Store, pinned ...string) *Service {
	return &Service{store: store, pinned: pinned}
}

// toCRI is toCRI of the package with Pinned set for a pinned image.
func (s *Service) toCRI(img image.Image) *runtimeapi.Image {
	out := toCRI(img)
	for _, ref := range s.pinned {
		if p, err := s.store.Get(ref); err == nil && p.ID == img.ID {
			out.Pinned = true
		}
	}
	return out
}

// ListImages lists the store's images (sorted by ID) that pass the filter
// (see Matches).
func (s *Service) ListImages(_ context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	return &runtimeapi.ListImagesResponse{Images: s.list(req.GetFilter())}, nil
}

func (s *Service) list(filter *runtimeapi.ImageFilter) []*runtimeapi.Image {
	var out []*runtimeapi.Image
	for _, img := range s.store.List() {
		if Matches(img, filter) {
			out = append(out, s.toCRI(img))
		}
	}
	return out
}

// streamBatch is how many images a StreamImages response carries.
const streamBatch = 100

// StreamImages is ListImages in batches of streamBatch images; no image
// sends no response.
func (s *Service) StreamImages(req *runtimeapi.StreamImagesRequest, stream grpc.ServerStreamingServer[runtimeapi.StreamImagesResponse]) error {
	images := s.list(req.GetFilter())
	for start := 0; start < len(images); start += streamBatch {
		batch := images[start:min(start+streamBatch, len(images))]
		if err := stream.Send(&runtimeapi.StreamImagesResponse{Images: batch}); err != nil {
			return err
		}
	}
	return nil
}

// ImageStatus returns the image named by ID, short ID, tag or digest
// reference; for an image the store lacks, a response with no image and no
// error, as CRI requires. A malformed name is InvalidArgument. Verbose adds
// the record as JSON under "info".
func (s *Service) ImageStatus(_ context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	ref := req.GetImage().GetImage()
	if err := checkRef(ref); err != nil {
		return nil, ToStatus(err)
	}
	img, err := s.store.Get(ref)
	if errdefs.IsNotFound(err) {
		return &runtimeapi.ImageStatusResponse{}, nil
	}
	if err != nil {
		return nil, ToStatus(err)
	}
	resp := &runtimeapi.ImageStatusResponse{Image: s.toCRI(img)}
	if req.GetVerbose() {
		if resp.Info, err = verboseInfo(img); err != nil {
			return nil, ToStatus(err)
		}
	}
	return resp, nil
}

// PullImage pulls the image with the request's credentials (through the
// store's mirrors) and returns its ID as image_ref: the value ListImages,
// ImageStatus and the container APIs report as the image's id. The runtime
// handler and sandbox config are not used: one store serves every handler.
func (s *Service) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	ref := req.GetImage().GetImage()
	if err := checkRef(ref); err != nil {
		return nil, ToStatus(err)
	}
	img, err := s.store.Pull(ctx, ref, authOf(req.GetAuth()))
	if err != nil {
		return nil, requestStatus(ctx, err)
	}
	return &runtimeapi.PullImageResponse{ImageRef: img.ID}, nil
}

// RemoveImage removes the named image with all its tags and digests. An
// image the store lacks is already removed: success. An image a container's
// rootfs uses is refused with FailedPrecondition naming the containers.
func (s *Service) RemoveImage(_ context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	ref := req.GetImage().GetImage()
	if err := checkRef(ref); err != nil {
		return nil, ToStatus(err)
	}
	err := s.store.Remove(ref)
	if err != nil && !errdefs.IsNotFound(err) {
		return nil, ToStatus(err)
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}

// ImageFsInfo reports the filesystem holding the store: its mountpoint and
// what the unpacked layers and image records take (bytes and inodes).
// container_filesystems is left empty, which CRI and kubelet read as "the
// containers' writable layers are on the image filesystem": they are, under
// the same root, and are the runtime's to report per container
// (ContainerStats' writable_layer).
func (s *Service) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	u, err := s.store.FsInfo()
	if err != nil {
		return nil, ToStatus(err)
	}
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{
		Timestamp:  time.Now().UnixNano(),
		FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: u.Mountpoint},
		UsedBytes:  &runtimeapi.UInt64Value{Value: u.UsedBytes},
		InodesUsed: &runtimeapi.UInt64Value{Value: u.InodesUsed},
	}}}, nil
}
