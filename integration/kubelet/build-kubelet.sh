#!/usr/bin/env bash
# Builds a real kubelet from the Go module proxy into $1 (default bin/kubelet).
#
# k8s.io/kubernetes cannot be `go install`ed: its go.mod replaces every
# k8s.io/<staging> module by a ./staging/src/... path that only exists in a
# checkout. So: a scratch module in a temp dir that requires k8s.io/kubernetes
# at KUBE_VERSION and replaces each of those staging modules (the list is read
# from kubernetes' own go.mod) by its published v0.<minor>.<patch> tag.
set -euo pipefail

out=${1:-bin/kubelet}
KUBE_VERSION=${KUBE_VERSION:-v1.37.2}
GO=${GO:-go}

if [[ -x $out ]]; then
	echo "kubelet: $out present, not rebuilt (remove it to rebuild)"
	exit 0
fi
case $out in /*) ;; *) out=$PWD/$out ;; esac

staging_version=v0.${KUBE_VERSION#v1.}
tmp=$(mktemp -d /tmp/kubelet-build.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

gomod=$(cd "$tmp" && GOFLAGS=-mod=mod $GO mod download -json "k8s.io/kubernetes@$KUBE_VERSION" |
	sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
[[ -f $gomod ]] || { echo "kubelet: k8s.io/kubernetes@$KUBE_VERSION not served by the module proxy" >&2; exit 1; }

# Every "k8s.io/X => ./staging/..." line of kubernetes' go.mod.
mapfile -t staging < <(sed -n 's#^[[:space:]]*\(k8s\.io/[^[:space:]]*\)[[:space:]]*=>[[:space:]]*\./staging/.*#\1#p' "$gomod")
(( ${#staging[@]} > 0 )) || { echo "kubelet: no staging replaces found in $gomod" >&2; exit 1; }

goversion=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$gomod")
{
	echo "module kubeletbuild"
	echo
	echo "go ${goversion:-1.26.0}"
	echo
	echo "require k8s.io/kubernetes $KUBE_VERSION"
	echo
	echo "replace ("
	for m in "${staging[@]}"; do echo "	$m => $m $staging_version"; done
	echo ")"
} >"$tmp/go.mod"
echo "kubelet: building k8s.io/kubernetes@$KUBE_VERSION/cmd/kubelet (${#staging[@]} staging modules at $staging_version)"

start=$SECONDS
cd "$tmp"
GOFLAGS=-mod=mod $GO get "k8s.io/kubernetes/cmd/kubelet@$KUBE_VERSION"
# The version kubelet reports (--version, the CRI Version call's client side):
# hack/lib/version.sh sets these from git; a module build has no git.
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$(echo "$KUBE_VERSION" | cut -d. -f2) -X $pkg.gitTreeState=clean"
CGO_ENABLED=0 GOFLAGS=-mod=mod $GO build -trimpath -ldflags "$ldflags" -o "$out.tmp" k8s.io/kubernetes/cmd/kubelet
mv "$out.tmp" "$out"
echo "kubelet: built $out in $((SECONDS - start))s: $("$out" --version)"
