#!/usr/bin/env bash
# make node-conformance: Kubernetes' node e2e suite (test/e2e_node, the
# [NodeConformance] specs) with bin/containerd --cri-listen as the node's
# container runtime, fully offline. See docs/node-conformance.md.
#
#   1. builds (cached in bin/) kubelet, the suite's e2e_node.test, and the
#      suite's agnhost and nonewprivs programs from the Go module proxy;
#   2. stages the images the specs pull, rebuilt offline (agnhost,
#      nonewprivs, busybox from Debian's busybox-static, pause from bin/pause,
#      nginx and glibc's hostname in a minimal Debian root filesystem from
#      .debs, nonroot as busybox run as 1234) and serves them from a registry
#      of its own (integration/node-conformance/registry) on a free loopback
#      port, under their original paths and tags;
#   3. starts bin/containerd on private dirs with a CNI network of its own
#      (bridge + host-local + portmap), the registries the suite names
#      mirrored to that registry, in a cgroup of its own (kubelet's
#      --runtime-cgroups);
#   4. runs e2e_node.test: it starts etcd and the API server in-process and
#      the kubelet next to it (bin/kubelet) on the daemon's CRI socket;
#   5. cleans up: pods through the CRI, kubelet, the daemon, its shims and
#      runc containers, mounts under the work dir and /var/lib/kubelet (the
#      suite's fixed kubelet root), the bridge, the cgroups, the registry.
#
# Needs root, `make build`, the Go module proxy and Debian's archive the first
# time (kubelet, e2e_node.test: about 10 minutes of building; .debs cached in
# bin/node-conformance-cache). Knobs (environment):
#   NODE_CONFORMANCE_FOCUS  ginkgo focus (default '\[NodeConformance\]')
#   NODE_CONFORMANCE_SKIP   ginkgo skip (default 'Flaky|Slow|Serial')
#   NODE_CONFORMANCE_ARGS   more e2e_node.test flags (split on spaces)
#   NODE_CONFORMANCE_OUT    results dir (default bin/node-conformance-results)
#   DRY_RUN=1               list the specs (ginkgo dry run), start nothing
#   DAEMON_BIN_DIR          containerd, containerd-shim, runc, pause from there (default bin/)
#   KEEP=1                  keep the work dir
#   NODE_CONFORMANCE_NODES  parallel ginkgo processes (default 6)
#   NODE_CONFORMANCE_FEATURE_GATES  kubelet's and the suite's feature gates
#                           (default PodAndContainerStatsFromCRI=true)
# Results: e2e.log (the suite's output), junit.xml, summary.txt (counts,
# then every spec with its state), kubelet.log, daemon.log, registry.log.
set -euo pipefail

# bash reads a script as it runs it, and a run lasts an hour: it runs from a
# copy, so that an edit (or a git checkout) of this file cannot change it
# half way.
if [[ -z ${NODE_CONFORMANCE_REPO:-} ]]; then
	repo=$(cd "$(dirname "$0")/../.." && pwd)
	copy=$(mktemp /tmp/node-conformance-run.XXXXXX)
	cp "$0" "$copy"
	NODE_CONFORMANCE_REPO=$repo exec bash "$copy" "$@"
fi
rm -f "$0" # the copy: bash keeps it open
cd "$NODE_CONFORMANCE_REPO"
REPO=$PWD
BIN=$REPO/bin
GO=${GO:-go}
export KUBE_VERSION=${KUBE_VERSION:-v1.37.2}
OUT=${NODE_CONFORMANCE_OUT:-$BIN/node-conformance-results}
CACHE=$BIN/node-conformance-cache
FOCUS=${NODE_CONFORMANCE_FOCUS:-'\[NodeConformance\]'}
SKIP=${NODE_CONFORMANCE_SKIP:-'Flaky|Slow|Serial'}
KUBELET_ROOT=/var/lib/kubelet # fixed by the suite (services.KubeletRootDirectory)

say() { printf '%s node-conformance: %s\n' "$(date +%T)" "$*" >&2; }
die() { say "FATAL: $*"; exit 1; }

[[ $(id -u) == 0 ]] || die "needs root"
# the daemon's binaries: bin/ (make build), or DAEMON_BIN_DIR (a build of
# another tree)
DBIN=${DAEMON_BIN_DIR:-$BIN}
for b in containerd containerd-shim runc pause; do
	[[ -x $DBIN/$b ]] || die "$DBIN/$b missing: run make build"
done
if [[ ! -x /usr/lib/cni/bridge || ! -x /usr/lib/cni/host-local || ! -x /usr/lib/cni/portmap || ! -x /usr/lib/cni/loopback ]] ||
	! command -v iptables >/dev/null || ! command -v curl >/dev/null; then
	say "installing containernetworking-plugins, iptables, curl"
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq containernetworking-plugins iptables curl >/dev/null
fi
for c in dpkg-deb apt-get ip mount umount python3 ldd; do
	command -v $c >/dev/null || die "$c missing"
done

# ------------------------------------------------------------ 1. binaries

T0=$SECONDS
GO=$GO ./integration/kubelet/build-kubelet.sh "$BIN/kubelet"
GO=$GO ./integration/node-conformance/build-e2e-node.sh "$BIN"
say "kubelet: $("$BIN/kubelet" --version); suite: k8s.io/kubernetes@$KUBE_VERSION test/e2e_node ($((SECONDS - T0))s of building)"

W=$(mktemp -d /tmp/node-conformance.XXXXXX)
# Searchable by others (not listable): runc finds a user-namespaced pod's
# rootfs under --root from inside the namespace, where root is "others".
chmod 0711 "$W"
mkdir -p "$W"/{bin,stage,state,journal,root,runc,runc-test-handler,cni,ipam,logs,path,report,podlogs} "$OUT"
LOGS=$W/logs
SOCK=$W/cri.sock
SUFFIX=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
BRIDGE=nc$SUFFIX
CG=/node-conformance-$SUFFIX # the daemon's and kubelet's cgroups, in every v1 hierarchy
DAEMON_PID= REGISTRY_PID= E2E_PID=
MADE_KUBELET_ROOT=0 ROOT_WAS_MOUNTED=0 MADE_POD_LOGS=0
MADE_KUBEPODS=()

stop_pid() { # stop_pid PID: stop a process this script started and reap it
	local pid=$1 i
	[[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for i in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
	kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null || true
}

# pids_of EXE: the processes running EXE with the work dir on their command line
pids_of() {
	local pid
	for pid in $(grep -lsF "$W" /proc/[0-9]*/cmdline | cut -d/ -f3); do
		[[ $(readlink "/proc/$pid/exe" 2>/dev/null) == "$1" ]] && echo "$pid"
	done
	return 0
}

mounts_under() { awk -v d="$1/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo; }

cleanup() {
	local rc=$? pid p m c
	set +e
	trap - EXIT INT TERM
	say "cleanup"
	stop_pid "$E2E_PID"
	# ginkgo's parallel processes (and process 1's services process) outlive
	# a ginkgo that was killed: they are ours by the work dir on their
	# command line; TERM lets them stop the services and kubelet first
	for pid in $(pids_of "$BIN/e2e_node.test"); do kill -TERM "$pid"; done
	for i in $(seq 50); do [[ -z $(pids_of "$BIN/e2e_node.test") ]] && break; sleep 0.2; done
	for pid in $(pids_of "$BIN/e2e_node.test"); do kill -KILL "$pid"; done
	# kubelet dies with the suite (Pdeathsig); one that did not is ours by
	# its config in the work dir
	for pid in $(pids_of "$BIN/kubelet"); do kill -KILL "$pid"; done
	if [[ -n $DAEMON_PID ]] && kill -0 "$DAEMON_PID" 2>/dev/null; then
		# what the suite left, removed as kubelet would (CNI DEL included)
		timeout 180 "$W/bin/cri" -socket "$SOCK" rmpods >"$LOGS/cleanup-rmpods.log" 2>&1
	fi
	stop_pid "$DAEMON_PID"
	# shims outlive the daemon by design: stop the ones of this run, then
	# any container runc still has
	for pid in $(pids_of "$DBIN/containerd-shim"); do kill -KILL "$pid"; done
	for r in "$W/runc" "$W/runc-test-handler"; do
		for p in $("$DBIN/runc" --root "$r" list -q 2>/dev/null); do
			"$DBIN/runc" --root "$r" delete --force "$p" >/dev/null 2>&1
		done
	done
	stop_pid "$REGISTRY_PID"
	# mounts under the work dir and kubelet's root (overlays, shm, netns
	# pins, volumes), deepest first
	for d in "$W" "$KUBELET_ROOT"; do
		m=$(mounts_under "$d" | sort -r)
		for p in $m; do umount -l "$p" 2>/dev/null; done
		[[ -n $m ]] && say "unmounted what was left under $d: $(echo $m | wc -w) mounts"
	done
	# kubelet bind-mounts its root onto itself (to make it shared)
	if [[ $ROOT_WAS_MOUNTED == 0 ]]; then
		while awk -v d="$KUBELET_ROOT" '$5 == d { f = 1 } END { exit !f }' /proc/self/mountinfo; do
			umount -l "$KUBELET_ROOT" 2>/dev/null || break
		done
	fi
	# kubelet's root: all of it when this run made it, else all but the
	# device-plugins dir any kubelet of the host shares
	if [[ $MADE_KUBELET_ROOT == 1 ]]; then
		rm -rf "$KUBELET_ROOT"
	elif [[ -d $KUBELET_ROOT ]]; then
		find "$KUBELET_ROOT" -mindepth 1 -maxdepth 1 ! -name device-plugins -exec rm -rf {} +
	fi
	# the pods' logs (kubelet leaves those of pods it did not remove itself)
	[[ $MADE_POD_LOGS == 1 ]] && rm -rf /var/log/pods /var/log/containers
	ip link del "$BRIDGE" 2>/dev/null
	for c in /sys/fs/cgroup/*/; do
		[[ -d $c$CG ]] && find "$c$CG" -depth -type d -exec rmdir {} + 2>/dev/null
		for p in "${MADE_KUBEPODS[@]}"; do
			[[ $p == "$c"* && -d $p ]] && find "$p" -depth -type d -exec rmdir {} + 2>/dev/null
		done
	done
	cp -f "$LOGS"/* "$OUT"/ 2>/dev/null
	if [[ ${KEEP:-} == 1 ]]; then
		say "work dir kept: $W"
	else
		rm -rf "$W"
	fi
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { # a free loopback TCP port
	local p
	while :; do
		p=$((20000 + RANDOM % 20000))
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
	done
}

# The suite's flags (e2e_node.test's own), shared by the dry run and the run.
REPORT=$W/report
e2e_args=(
	--report-dir="$REPORT"
	--prepull-images=false
	--container-runtime-endpoint="unix://$SOCK" --image-service-endpoint="unix://$SOCK"
	--container-runtime-pid-file="$W/containerd.pid"
)

if [[ ${DRY_RUN:-} == 1 ]]; then
	(cd "$W" && "$BIN/e2e_node.test" --ginkgo.focus="$FOCUS" --ginkgo.skip="$SKIP" --ginkgo.dry-run \
		--ginkgo.v --ginkgo.no-color "${e2e_args[@]}" ${NODE_CONFORMANCE_ARGS:-}) >"$LOGS/e2e.log" 2>&1 || true
	grep -E '^(Ran |Will run)' "$LOGS/e2e.log" >&2 || tail -20 "$LOGS/e2e.log" >&2
	exit 0
fi

# ------------------------------------------------------------ host checks

# Specs this host cannot pass whatever the runtime, each found by a check
# here, are added to the skip (and said so).
if ip link add "ncdummy$SUFFIX" type dummy 2>/dev/null; then
	ip link del "ncdummy$SUFFIX"
else
	# the privileged spec's proof of privilege is `ip link add dummy1 type dummy`
	say "this kernel has no dummy network device: skipping 'PrivilegedPod should enable privileged commands'"
	SKIP="$SKIP|PrivilegedPod should enable privileged commands"
fi
if [[ ! -e /sys/fs/cgroup/cgroup.controllers ]]; then
	# the stats summary spec wants PSI (pressure) figures of every pod and
	# container, which only cgroup v2 has
	say "cgroup v1 here (no PSI): skipping 'Summary API ... should report resource usage through the stats api'"
	SKIP="$SKIP|Summary API when querying /stats/summary should report resource usage through the stats api"
fi

# The suite's kubelet has fixed ports and a fixed root dir.
for p in 6443 10248 10250 10255; do
	if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then die "127.0.0.1:$p is in use (the suite's API server and kubelet use it)"; fi
done
# Any kubelet makes $KUBELET_ROOT/device-plugins (its device plugin socket's
# dir is fixed), so only a pods dir with pods in it tells of another
# kubelet using this root.
if [[ -n $(ls -A "$KUBELET_ROOT/pods" 2>/dev/null) ]]; then
	die "$KUBELET_ROOT/pods is not empty: another kubelet's? (the suite's kubelet root is fixed there)"
fi
[[ -e $KUBELET_ROOT ]] || MADE_KUBELET_ROOT=1
# kubelet's pod log dirs (its default, which the log path spec mounts)
[[ -e /var/log/pods ]] || MADE_POD_LOGS=1
awk -v d="$KUBELET_ROOT" '$5 == d { f = 1 } END { exit !f }' /proc/self/mountinfo && ROOT_WAS_MOUNTED=1
mkdir -p "$KUBELET_ROOT"
# kubelet makes /kubepods (cgroupRoot /: the specs look for the QoS
# cgroups there); removed at the end when this run made it
for c in /sys/fs/cgroup/*/; do
	[[ -e ${c}cgroup.procs && ! -e ${c}kubepods ]] && MADE_KUBEPODS+=("${c}kubepods")
done

# ------------------------------------------------------------ 2. images

# Debian packages, cached: busybox-static (the busybox image, and the shell
# of the Debian root filesystem), and the minimal root filesystem of the
# nginx and glibc-dns-testing images: glibc, nginx and its libraries,
# hostname (glibc's `hostname -f`); bash-static (agnhost's /bin/bash: the
# original is Alpine with bash, and specs run `/bin/bash -c` in it; and the
# busybox image's sh, below); netcat-openbsd (agnhost's nc, as the
# original's: the node-to-pod UDP spec waits for nc -u's answer).
DEBS=(busybox-static bash-static netcat-openbsd base-files libc6 libgcc-s1 libcrypt1 libpcre2-8-0 libssl3 zlib1g nginx nginx-common hostname)
mkdir -p "$CACHE"
for pkg in "${DEBS[@]}"; do
	if ! ls "$CACHE/${pkg}"_*.deb >/dev/null 2>&1; then
		say "apt-get download $pkg"
		(cd "$CACHE" && apt-get download -q "$pkg" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2) ||
			die "apt-get download $pkg failed"
	fi
done
deb() { ls "$CACHE/$1"_*.deb | head -1; }

S=$W/stage
say "staging image trees"
# busybox: Debian's busybox-static with every applet a hard link in /bin
# (as in the busybox image), /tmp 1777; the users come from the registry.
B=$S/busybox
mkdir -p "$W/deb-bb" "$B"/{bin,etc,root,tmp,var/www,var/spool/mail,home,proc,sys,dev}
dpkg-deb -x "$(deb busybox-static)" "$W/deb-bb"
chmod 1777 "$B/tmp"
chmod 0700 "$B/root"
install -m 0755 "$W/deb-bb/bin/busybox" "$B/bin/busybox"
for a in $("$B/bin/busybox" --list); do
	[[ -e $B/bin/$a ]] || ln "$B/bin/busybox" "$B/bin/$a"
done
printf 'passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n' >"$B/etc/nsswitch.conf"
# sh (integration/node-conformance/sh) runs busybox's ash, or bash
# (Debian's bash-static) when the environment holds a name that is not a
# shell name: Debian's busybox 1.35 ash drops those (data-1=...) from what
# its children get, and the ConfigMap and Secret envFrom specs run
# `sh -c env` expecting them (the busybox 1.37 of the original image keeps
# them); other specs expect ash's own error messages.
mkdir -p "$W/deb-bash"
dpkg-deb -x "$(deb bash-static)" "$W/deb-bash"
install -m 0755 "$W/deb-bash/bin/bash-static" "$B/bin/bash"
rm -f "$B/bin/sh"
CGO_ENABLED=0 $GO build -trimpath -o "$B/bin/sh" ./integration/node-conformance/sh
# nmeter: not an applet of Debian's busybox; the lifecycle specs stamp
# their lines with its %3t (integration/node-conformance/nmeter)
CGO_ENABLED=0 $GO build -trimpath -o "$B/bin/nmeter" ./integration/node-conformance/nmeter

# copy_bin SRC ROOT DEST: a host binary and every library ldd names, at the
# same paths (this host is Debian 12, as the .debs)
copy_bin() {
	local src=$1 root=$2 dest=$3 lib
	install -D -m 0755 "$src" "$root$dest"
	for lib in $(ldd "$src" | awk '/=> \// {print $3} /^\t\/[^ ]*ld-linux/ {print $1}'); do
		[[ -e $root$lib ]] || install -D -m 0755 "$(readlink -f "$lib")" "$root$lib"
	done
}

# agnhost: its program as /agnhost, /agnhost-2 a link to it (entrypoint
# specs), /uploads (netexec), bash and curl (the original is Alpine with
# both: the hook specs curl from exec hooks), porter's localhost.crt and
# .key (netexec's TLS in the https hook specs), from the suite's module
mkdir -p "$S/agnhost/uploads" "$S/agnhost/bin" "$W/deb-nc"
install -m 0755 "$W/deb-bash/bin/bash-static" "$S/agnhost/bin/bash"
# and bash as its sh: the original's sh (Alpine's busybox) finds programs
# on PATH, where Debian's static busybox ash runs its own applets first,
# and the node-to-pod UDP spec needs openbsd nc's -u, not busybox's nc
install -m 0755 "$W/deb-bash/bin/bash-static" "$S/agnhost/bin/sh"
copy_bin "$(command -v curl)" "$S/agnhost" /usr/bin/curl
dpkg-deb -x "$(deb netcat-openbsd)" "$W/deb-nc"
copy_bin "$W/deb-nc/bin/nc.openbsd" "$S/agnhost" /usr/bin/nc
kdir=$(cd "$W" && GOFLAGS=-mod=mod $GO mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
install -m 0644 "$kdir/test/images/agnhost/porter/localhost.crt" "$kdir/test/images/agnhost/porter/localhost.key" "$S/agnhost/"
install -m 0755 "$BIN/e2e-agnhost" "$S/agnhost/agnhost"
ln -s agnhost "$S/agnhost/agnhost-2"

# nonewprivs: the suite's nnp, setuid root
install -D -m 4755 "$BIN/e2e-nnp" "$S/nonewprivs/usr/local/bin/nnp"

# pause
install -D -m 0755 "$DBIN/pause" "$S/pause/pause"

# The Debian root filesystem: the packages unpacked (dpkg-deb -x, no
# maintainer scripts), sh and the rest of the applets from busybox-static
# where Debian has no program of that name, users, an nginx config of ours.
D=$S/debian
mkdir -p "$D"
for pkg in "${DEBS[@]}"; do
	case $pkg in busybox-static | bash-static | netcat-openbsd) continue ;; esac
	dpkg-deb -x "$(deb "$pkg")" "$D"
done
rm -rf "$D/usr/share/doc" "$D/usr/share/man" "$D/usr/share/locale" "$D/usr/share/lintian"
mkdir -p "$D"/{bin,tmp,root,proc,sys,dev,run,var/log/nginx,var/lib/nginx,var/www/html,usr/share/nginx/html}
chmod 1777 "$D/tmp"
install -m 0755 "$W/deb-bb/bin/busybox" "$D/bin/busybox"
for a in $("$D/bin/busybox" --list); do
	[[ -e $D/bin/$a || -e $D/usr/bin/$a || -e $D/sbin/$a || -e $D/usr/sbin/$a ]] || ln "$D/bin/busybox" "$D/bin/$a"
done
[[ -x $D/bin/hostname ]] || die "Debian's hostname missing from the root filesystem"
cat >"$D/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin
bin:x:2:2:bin:/bin:/usr/sbin/nologin
sys:x:3:3:sys:/dev:/usr/sbin/nologin
www-data:x:33:33:www-data:/var/www:/usr/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
EOF
cat >"$D/etc/group" <<'EOF'
root:x:0:
daemon:x:1:
bin:x:2:
sys:x:3:
adm:x:4:
tty:x:5:
www-data:x:33:
users:x:100:
nogroup:x:65534:
EOF
printf 'passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n' >"$D/etc/nsswitch.conf"
cat >"$D/etc/nginx/nginx.conf" <<'EOF'
user www-data;
worker_processes 1;
pid /run/nginx.pid;
error_log stderr notice;
events { worker_connections 256; }
http {
	access_log /dev/stdout;
	default_type text/html;
	client_body_temp_path /var/lib/nginx/body;
	proxy_temp_path /var/lib/nginx/proxy;
	fastcgi_temp_path /var/lib/nginx/fastcgi;
	uwsgi_temp_path /var/lib/nginx/uwsgi;
	scgi_temp_path /var/lib/nginx/scgi;
	server {
		listen 80;
		root /usr/share/nginx/html;
		index index.html;
	}
}
EOF
printf '<html><body><h1>Welcome to nginx!</h1></body></html>\n' >"$D/usr/share/nginx/html/index.html"

# ------------------------------------------------------------ registry

say "building the registry and the CRI client"
$GO build -o "$W/bin/registry" ./integration/node-conformance/registry
$GO build -o "$W/bin/cri" ./integration/kubelet/cri
REGISTRY=127.0.0.1:$(free_port)
"$W/bin/registry" -addr "$REGISTRY" -stage "$S" -ready "$W/registry.ready" >"$LOGS/registry.log" 2>&1 &
REGISTRY_PID=$!
for i in $(seq 600); do
	[[ -s $W/registry.ready ]] && break
	kill -0 "$REGISTRY_PID" 2>/dev/null || { cat "$LOGS/registry.log" >&2; die "registry exited"; }
	sleep 0.2
done
[[ -s $W/registry.ready ]] || die "registry did not push its images"
say "registry on $REGISTRY: $(wc -l <"$W/registry.ready") images"
# The suite's registry override: its images are named after the local
# registry (the pulls go there by name); the registries it cannot reach
# offline stay as they are (the specs that pull from them expect a failure).
cat >"$W/repo-list.yaml" <<EOF
promoterE2eRegistry: $REGISTRY/e2e-test-images
buildImageRegistry: $REGISTRY/build-image
gcEtcdRegistry: $REGISTRY
gcRegistry: $REGISTRY
sigStorageRegistry: $REGISTRY/sig-storage
dockerLibraryRegistry: $REGISTRY/library
cloudProviderGcpRegistry: $REGISTRY/cloud-provider-gcp
EOF
export KUBE_TEST_REPO_LIST=$W/repo-list.yaml

# ------------------------------------------------------------ 3. daemon

for i in $(seq 50); do
	SUBNET=10.$((200 + RANDOM % 50)).$((RANDOM % 256)).0/24
	ip route | grep -q "^${SUBNET%.0/24}\." || break
done
cat >"$W/cni/10-node-conformance.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "node-conformance-$SUFFIX", "plugins": [
  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$SUBNET"}]], "dataDir": "$W/ipam",
            "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
EOF
# The RuntimeClass specs run pods with the handler "test-handler": runc
# again, under a runc root of its own, when the daemon has handlers.
handler_args=()
if "$DBIN/containerd" --help 2>&1 | grep -q -- '--cri-runtime-handler'; then
	handler_args=(--cri-runtime-handler "test-handler=$DBIN/runc,--root=$W/runc-test-handler")
else
	say "this daemon has no --cri-runtime-handler: the RuntimeClass specs will fail"
fi
# The daemon runs in a cgroup of its own in every v1 hierarchy (kubelet's
# --runtime-cgroups: the "runtime" system container of the stats summary);
# it is moved there as soon as it runs, before any shim starts (they start
# there too, and runc moves each container into its pod's cgroup).
procs=()
for c in /sys/fs/cgroup/*/; do
	[[ -e ${c}cgroup.procs ]] || continue
	mkdir -p "$c$CG/runtime" "$c$CG/kubelet"
	# a v1 cpuset starts empty: no process may join it until it has cpus
	# and mems (its parent's)
	if [[ -e ${c}cpuset.cpus ]]; then
		for d in "$c$CG" "$c$CG/runtime" "$c$CG/kubelet"; do
			cat "${c}cpuset.cpus" >"$d/cpuset.cpus"
			cat "${c}cpuset.mems" >"$d/cpuset.mems"
		done
	fi
	procs+=("$c$CG/runtime/cgroup.procs")
done
say "starting the daemon (bridge $BRIDGE, $SUBNET, cgroup $CG/runtime, work dir $W)"
"$DBIN/containerd" --debug \
	--state-dir "$W/state" --journal-dir "$W/journal" --listen "unix://$W/api.sock" \
	--runtime "$DBIN/runc" --runtime-args "--root=$W/runc" --shim "$DBIN/containerd-shim" \
	--cri-listen "$SOCK" --root "$W/root" \
	--cni-bin-dir /usr/lib/cni --cni-conf-dir "$W/cni" \
	--registry-mirror "registry.k8s.io=http://$REGISTRY" \
	--registry-mirror "gcr.io=http://$REGISTRY" \
	--registry-mirror "docker.io=http://$REGISTRY" \
	--insecure-registry "$REGISTRY" \
	"${handler_args[@]}" \
	--sandbox-pause "$DBIN/pause" >"$LOGS/daemon.log" 2>&1 &
DAEMON_PID=$!
echo "$DAEMON_PID" >"$W/containerd.pid"
for i in $(seq 100); do
	[[ -S $SOCK ]] && break
	kill -0 "$DAEMON_PID" 2>/dev/null || { tail -20 "$LOGS/daemon.log" >&2; die "daemon exited"; }
	sleep 0.1
done
[[ -S $SOCK ]] || die "no CRI socket after 10 s"
for f in "${procs[@]}"; do echo "$DAEMON_PID" >"$f"; done
say "runtime: $("$W/bin/cri" -socket "$SOCK" version)"

# ------------------------------------------------------------ 4. the suite

# kubelet's base configuration (the suite adds its static pod dir, auth
# and ports): the suite's own defaults (test/e2e_node/jenkins/
# default-kubelet-config.yaml) plus what this host needs: cgroup v1
# accepted (failCgroupV1: false), swap tolerated, no host-wide iptables
# chains. Pod logs stay in /var/log/pods: the log path specs mount it.
cat >"$W/kubelet-base.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: /
podCIDR: "10.100.0.0/24"
volumeStatsAggPeriod: 10s
fileCheckFrequency: 10s
evictionPressureTransitionPeriod: 30s
evictionHard:
  memory.available: 250Mi
  nodefs.available: 10%
  nodefs.inodesFree: 5%
evictionMinimumReclaim:
  nodefs.available: 5%
  nodefs.inodesFree: 5%
serializeImagePulls: false
failCgroupV1: false
failSwapOn: false
makeIPTablesUtilChains: false
EOF
# kubelet flags, after the suite's (the later wins): the daemon's cgroup,
# kubelet's own, and no --system-cgroups (the suite's /system: kubelet would
# move every process of the host's root cgroup into it).
kubelet_flags="--runtime-cgroups=$CG/runtime --kubelet-cgroups=$CG/kubelet --system-cgroups="

# kubelet's (and the suite's) feature gates: PodAndContainerStatsFromCRI
# (beta, off by default) makes kubelet take pod and container stats, and
# the /metrics/cadvisor container metrics, from the CRI (ListPodSandboxStats,
# ListPodSandboxMetrics): its cAdvisor knows only containerd's and CRI-O's
# own APIs, so without it the stats of this runtime's containers lack their
# pod and network (the Summary API and container metrics specs).
FEATURE_GATES=${NODE_CONFORMANCE_FEATURE_GATES-PodAndContainerStatsFromCRI=true}

# PATH without systemd-run: systemd is not PID 1 here, and the suite runs
# kubelet through systemd-run whenever it finds one.
for f in /usr/bin/* /usr/local/bin/*; do
	case ${f##*/} in systemd-run | systemctl) continue ;; esac
	[[ -e $W/path/${f##*/} ]] || ln -s "$f" "$W/path/${f##*/}"
done
SUITE_PATH=$W/path:/usr/local/sbin:/usr/sbin

# The specs run in NODES parallel ginkgo processes (the ginkgo CLI): most
# of their time is spent waiting (probes, restarts, grace periods); process
# 1 starts the services and kubelet, the others share them.
NODES=${NODE_CONFORMANCE_NODES:-6}
say "running e2e_node.test on $NODES ginkgo processes (focus '$FOCUS', skip '$SKIP'; output $OUT/e2e.log)"
T1=$SECONDS
set +e
# ginkgo runs a compiled suite in the suite's own directory, where the suite
# writes its kubeconfig, kubelet config and static pod dir, and looks for
# kubelet: a directory of the work dir with links to both.
mkdir -p "$W/suite"
ln -sf "$BIN/e2e_node.test" "$W/suite/e2e_node.test"
ln -sf "$BIN/kubelet" "$W/suite/kubelet"
(cd "$W/suite" && exec env PATH="$SUITE_PATH" "$BIN/ginkgo" run --nodes="$NODES" \
	--focus="$FOCUS" --skip="$SKIP" --no-color --timeout=24h -v \
	--output-dir="$LOGS" --junit-report=junit.xml \
	"$W/suite/e2e_node.test" -- "${e2e_args[@]}" \
	--kubelet-config-file="$W/kubelet-base.yaml" --kubelet-flags="$kubelet_flags" \
	${FEATURE_GATES:+--feature-gates="$FEATURE_GATES"} \
	${NODE_CONFORMANCE_ARGS:-}) >"$LOGS/e2e.log" 2>&1 &
E2E_PID=$!
wait "$E2E_PID"
E2E_RC=$?
E2E_PID=
set -e
E2E_SECS=$((SECONDS - T1))
cp -f "$REPORT"/kubelet.log "$LOGS/" 2>/dev/null || true
# summary.txt: the counts of the selected specs, then every one that did not
# pass with its reason, then those that passed (from the junit report)
python3 "$REPO/integration/node-conformance/summary.py" "$LOGS/junit.xml" "$E2E_SECS" "$E2E_RC" >"$LOGS/summary.txt" ||
	echo "no summary: see e2e.log" >"$LOGS/summary.txt"
grep -vE '^(passed|    )' "$LOGS/summary.txt" | cut -c1-200 >&2 || true
say "e2e_node.test exit status $E2E_RC after ${E2E_SECS}s; results in $OUT"
exit $E2E_RC
