// Package types holds the containerd v0.2.9 gRPC API (proto package
// "types", service "API"), generated from api.proto by `make proto`.
//
// The messages are wire-compatible with v0.2.9 clients: field numbers,
// scalar types and names are v0.2.9's exactly (docs/api.md section 2), and
// wire_test.go checks every one of them. Project
// extensions use new field numbers only: Event.seq (7) and
// EventsRequest.afterSeq (5).
//
// Servers implement APIServer (embedding UnimplementedAPIServer) and
// register it with RegisterAPIServer; clients use NewAPIClient.
package types
