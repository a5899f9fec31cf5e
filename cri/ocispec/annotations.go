package ocispec

// Annotations the specs carry, with containerd's keys, so that tools which
// know containerd's CRI (crictl inspect, monitoring agents, runc hooks)
// find what they expect.
const (
	AnnotationContainerType = "io.kubernetes.cri.container-type"
	AnnotationSandboxID     = "io.kubernetes.cri.sandbox-id"
	AnnotationSandboxName   = "io.kubernetes.cri.sandbox-name"
	AnnotationSandboxNS     = "io.kubernetes.cri.sandbox-namespace"
	AnnotationSandboxUID    = "io.kubernetes.cri.sandbox-uid"
	AnnotationSandboxLogDir = "io.kubernetes.cri.sandbox-log-directory"
	AnnotationContainerName = "io.kubernetes.cri.container-name"
	AnnotationImageName     = "io.kubernetes.cri.image-name"
	ContainerTypeSandbox    = "sandbox"
	ContainerTypeContainer  = "container"
)
