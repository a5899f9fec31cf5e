#!/usr/bin/env bash
# Builds containerd 2.x, the CRI peer of `make bench`'s cri group, from the
# Go module proxy: cmd/containerd and cmd/containerd-shim-runc-v2 of
# github.com/containerd/containerd/v2 at VERSION, into DIR (cached: an
# existing DIR/containerd of that version is kept). A scratch module in a
# temp dir requires the release; nothing is cloned. The flags follow
# containerd's own Makefile for a release build (no debug): -s -w, the
# version stamped in, the docs generator left out, the shim without cgo and
# without its gRPC server (ttrpc only).
#
#	bench/peer/build-containerd.sh v2.3.4 bench/build/containerd-v2.3.4
set -euo pipefail

version=${1:?usage: build-containerd.sh VERSION DIR}
dir=${2:?usage: build-containerd.sh VERSION DIR}
GO=${GO:-go}
mod=github.com/containerd/containerd/v2

if [[ -x $dir/containerd && -x $dir/containerd-shim-runc-v2 && -f $dir/VERSION && $(cat "$dir/VERSION") == "$version" ]]; then
	echo "containerd peer: $dir holds $version, not rebuilt (remove it to rebuild)"
	exit 0
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

tmp=$(mktemp -d /tmp/containerd-peer-build.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/go.mod" <<MOD
module containerdpeer

go 1.26.0

require $mod $version
MOD

start=$SECONDS
echo "containerd peer: building $mod@$version (cmd/containerd, cmd/containerd-shim-runc-v2) into $dir"
cd "$tmp"
GOFLAGS=-mod=mod $GO get "$mod/cmd/containerd@$version" "$mod/cmd/containerd-shim-runc-v2@$version"
stamp="-X $mod/version.Version=$version -X $mod/version.Revision=module-proxy -X $mod/version.Package=$mod"
GOFLAGS=-mod=mod $GO build -trimpath -tags urfave_cli_no_docs -ldflags "-s -w $stamp" \
	-o "$dir/containerd.tmp" "$mod/cmd/containerd"
CGO_ENABLED=0 GOFLAGS=-mod=mod $GO build -trimpath -tags "urfave_cli_no_docs no_grpc" -ldflags "-s -w $stamp" \
	-o "$dir/containerd-shim-runc-v2.tmp" "$mod/cmd/containerd-shim-runc-v2"
mv "$dir/containerd.tmp" "$dir/containerd"
mv "$dir/containerd-shim-runc-v2.tmp" "$dir/containerd-shim-runc-v2"
echo "$version" >"$dir/VERSION"
echo "containerd peer: built in $((SECONDS - start))s: $("$dir/containerd" --version)"
