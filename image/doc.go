// Package image is the daemon's image store: it pulls images from registries
// (with the request's credentials, through the hosts configured for the
// registry: hosts.toml files, mirrors, insecure hosts),
// verifies every blob against its digest, unpacks each layer once into its
// own directory keyed by chain id, and mounts a container's rootfs as an
// overlay of its image's layers under an upper dir of its own. It is what the
// CRI ImageService and container creation stand on.
//
// Layout under the store's root (docs/images.md says more):
//
//	root/images/<config hex>.json        one Image record per image
//	root/layers/<chain hex>/layer.json   a layer's record, written before the dir is renamed in
//	root/layers/<chain hex>/fs/          the unpacked layer, whiteouts in overlay form
//	root/containers/<id>/rootfs.json     a prepared rootfs: container id, image id, layers
//	root/containers/<id>/{upper,work,rootfs}
//	root/tmp/                            downloads, unpacks and removals in progress
//
// Everything that appears under images/, layers/ and containers/ appears
// whole, by a rename: a crash leaves either nothing or a complete entry, and
// root/tmp is emptied by Open. A Store is safe for concurrent use.
package image
