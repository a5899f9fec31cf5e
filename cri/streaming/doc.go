// Package streaming serves the CRI's Exec, Attach and PortForward streams.
//
// The CRI calls return only a URL: kubelet (or crictl) then connects to it
// and speaks SPDY or websocket, as for a kubelet's own streaming endpoint.
// The protocol work is done by k8s.io/cri-streaming; this package owns the
// listener and the lifetime of every stream, so that Stop ends them all and
// waits for the runtime calls behind them, checks the requests before any
// URL is handed out, and gives the runtime an interface in the supervisor's
// terms (an exit code, errdefs errors) instead of the library's.
//
// The server is plain HTTP: it is meant for a loopback address, where only
// local processes holding a one-time token (eight random characters valid
// for a minute) can reach it.
package streaming
