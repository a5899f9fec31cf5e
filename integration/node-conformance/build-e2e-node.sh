#!/usr/bin/env bash
# Builds, from the Go module proxy, for KUBE_VERSION (default v1.37.2, the
# kubelet of `make kubelet-e2e`), into the directory $1 (default bin/):
#   e2e_node.test  Kubernetes' node e2e suite (k8s.io/kubernetes/test/e2e_node,
#                  `go test -c`); it runs etcd and the API server in-process
#                  and starts the kubelet found next to it (bin/kubelet);
#   e2e-agnhost    the suite's agnhost (test/images/agnhost), for its image;
#   e2e-nnp        the suite's nonewprivs program (test/images/nonewprivs);
#   ginkgo         the ginkgo CLI of the version kubernetes' go.mod requires,
#                  which runs the suite's specs in parallel processes.
# Each is skipped when present (remove it to rebuild).
#
# As for kubelet (integration/kubelet/build-kubelet.sh): k8s.io/kubernetes
# replaces its staging modules by ./staging/... paths that only a checkout
# has, so a scratch module in a temp dir requires k8s.io/kubernetes at
# KUBE_VERSION and replaces each of them (read from kubernetes' own go.mod)
# by its published v0.<minor>.<patch>.
set -euo pipefail

dir=${1:-bin}
KUBE_VERSION=${KUBE_VERSION:-v1.37.2}
GO=${GO:-go}
case $dir in /*) ;; *) dir=$PWD/$dir ;; esac

declare -A pkgs=(
	[e2e_node.test]=k8s.io/kubernetes/test/e2e_node
	[e2e-agnhost]=k8s.io/kubernetes/test/images/agnhost
	[e2e-nnp]=k8s.io/kubernetes/test/images/nonewprivs
)
missing=()
for b in e2e_node.test e2e-agnhost e2e-nnp ginkgo; do
	[[ -x $dir/$b ]] || missing+=("$b")
done
if ((${#missing[@]} == 0)); then
	echo "e2e_node: $dir/e2e_node.test, e2e-agnhost, e2e-nnp, ginkgo present, not rebuilt (remove one to rebuild it)"
	exit 0
fi

staging_version=v0.${KUBE_VERSION#v1.}
tmp=$(mktemp -d /tmp/e2e-node-build.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

gomod=$(cd "$tmp" && GOFLAGS=-mod=mod $GO mod download -json "k8s.io/kubernetes@$KUBE_VERSION" |
	sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
[[ -f $gomod ]] || { echo "e2e_node: k8s.io/kubernetes@$KUBE_VERSION not served by the module proxy" >&2; exit 1; }

mapfile -t staging < <(sed -n 's#^[[:space:]]*\(k8s\.io/[^[:space:]]*\)[[:space:]]*=>[[:space:]]*\./staging/.*#\1#p' "$gomod")
(( ${#staging[@]} > 0 )) || { echo "e2e_node: no staging replaces found in $gomod" >&2; exit 1; }

goversion=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$gomod")
{
	echo "module e2enodebuild"
	echo
	echo "go ${goversion:-1.26.0}"
	echo
	echo "require k8s.io/kubernetes $KUBE_VERSION"
	echo
	echo "replace ("
	for m in "${staging[@]}"; do echo "	$m => $m $staging_version"; done
	echo ")"
} >"$tmp/go.mod"

start=$SECONDS
cd "$tmp"
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$(echo "$KUBE_VERSION" | cut -d. -f2) -X $pkg.gitTreeState=clean"
for b in "${missing[@]}"; do
	if [[ $b == ginkgo ]]; then
		ginkgo=$(sed -n 's#^[[:space:]]*github.com/onsi/ginkgo/v2 \(v[^[:space:]]*\).*#\1#p' "$gomod" | head -1)
		[[ -n $ginkgo ]] || { echo "e2e_node: no ginkgo version in $gomod" >&2; exit 1; }
		echo "e2e_node: installing ginkgo $ginkgo"
		(cd / && GOFLAGS=-mod=mod GOBIN=$dir CGO_ENABLED=0 $GO install "github.com/onsi/ginkgo/v2/ginkgo@$ginkgo")
		continue
	fi
	echo "e2e_node: building $b from k8s.io/kubernetes@$KUBE_VERSION (${pkgs[$b]}; ${#staging[@]} staging modules at $staging_version)"
	# go get resolves the package's whole module graph into the scratch go.mod
	GOFLAGS=-mod=mod $GO get "${pkgs[$b]}@$KUBE_VERSION"
	if [[ $b == *.test ]]; then
		CGO_ENABLED=0 GOFLAGS=-mod=mod $GO test -c -vet=off -trimpath -ldflags "$ldflags" -o "$dir/$b.tmp" "${pkgs[$b]}"
	else
		CGO_ENABLED=0 GOFLAGS=-mod=mod $GO build -trimpath -ldflags "$ldflags" -o "$dir/$b.tmp" "${pkgs[$b]}"
	fi
	mv "$dir/$b.tmp" "$dir/$b"
done
echo "e2e_node: built ${missing[*]} in $((SECONDS - start))s"
