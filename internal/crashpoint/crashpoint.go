// Package crashpoint names the places where the daemon may die in the
// middle of a CRI call (RunPodSandbox, CreateContainer...): each step
// boundary calls At with the step's name. The daemon is built without the
// failpoints tag and At compiles to nothing (crashpoint_off.go); built with
// -tags failpoints (the end-to-end crash tests build it so), At SIGKILLs the
// process when $CONTAINERD_CRI_CRASH names the point: a real crash, with
// nothing flushed, no defer run and no undo, at exactly that step. The
// points are listed in docs/cri.md ("Crash points").
package crashpoint

// Env is the environment variable that arms a crash point in a failpoints
// build: "<point>" dies the first time the point is reached, "<point>#N"
// the Nth time (a point the pause's start and a container's start share).
const Env = "CONTAINERD_CRI_CRASH"
