#!/usr/bin/env bash
# make critest CRI_TOOLS=DIR: the CRI conformance suite of cri-tools (critest)
# against bin/containerd --cri-listen, fully offline. See docs/critest.md.
#
#   1. builds critest and crictl from the cri-tools checkout in $CRI_TOOLS
#      (v1.34.0, with its vendor/ dir) into bin/critest, bin/crictl;
#   2. stages the images critest pulls, rebuilt from Debian binaries (busybox,
#      nginx, procps' pgrep, util-linux's ipcs and their libraries), and serves
#      them from a registry of its own on 127.0.0.1:5000
#      (integration/critest/registry) under their original paths and tags;
#   3. starts bin/containerd on private dirs with a CNI network of its own
#      (bridge + host-local + portmap; unique bridge name, private /24) and
#      registry.k8s.io and gcr.io mirrored to that registry;
#   4. runs critest (skips: AppArmor, the digest-pinned pull; see SKIP below);
#   5. cleans up: pods through crictl, the daemon, its shims and runc
#      containers, mounts under the work dir, the bridge, the registry.
#
# Needs root, `make build`, network access to Debian's archive the first time
# (apt-get download busybox nginx; cached in bin/critest-cache) and
# containernetworking-plugins and iptables (installed with apt if missing).
# Results: $CRITEST_OUT (default bin/critest-results): critest.log (the full
# ginkgo output), junit.xml, daemon.log, registry.log, summary.txt.
# A subset: CRITEST_FOCUS (a ginkgo focus regexp, e.g. 'Image Manager|Networking');
# more flags: CRITEST_ARGS (split on spaces, e.g. '-ginkgo.fail-fast').
# CRITEST_PROXY=1 (diagnostic, not a conformance run): critest goes through
# integration/critest/cgroupfs-proxy, which answers RuntimeConfig with the
# cgroupfs driver while the daemon does not implement it.
# KEEP=1 keeps the work dir.
set -euo pipefail

cd "$(dirname "$0")/../.."
REPO=$PWD
BIN=$REPO/bin
GO=${GO:-go}
CRI_TOOLS=${CRI_TOOLS:-}
OUT=${CRITEST_OUT:-$BIN/critest-results}
CACHE=$BIN/critest-cache
REGISTRY_ADDR=127.0.0.1:5000

say() { printf '%s critest: %s\n' "$(date +%T)" "$*" >&2; }
die() { say "FATAL: $*"; exit 1; }

[[ $(id -u) == 0 ]] || die "needs root"
[[ -n $CRI_TOOLS && -d $CRI_TOOLS/cmd/critest ]] ||
	die "CRI_TOOLS must name a cri-tools checkout (with cmd/critest), e.g. make critest CRI_TOOLS=/tmp/cri-tools"
CRI_TOOLS=$(cd "$CRI_TOOLS" && pwd)
for b in containerd containerd-shim runc pause; do
	[[ -x $BIN/$b ]] || die "bin/$b missing: run make build"
done
if [[ ! -x /usr/lib/cni/bridge || ! -x /usr/lib/cni/host-local || ! -x /usr/lib/cni/portmap || ! -x /usr/lib/cni/loopback ]] ||
	! command -v iptables >/dev/null; then
	say "installing containernetworking-plugins and iptables"
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq containernetworking-plugins iptables >/dev/null
fi
for c in pgrep ipcs ipcmk ldd dpkg-deb apt-get ip; do
	command -v $c >/dev/null || die "$c missing (procps, util-linux, libc-bin, dpkg, apt, iproute2)"
done

# ------------------------------------------------------------ 1. critest

# the version critest reports: CRI_TOOLS_VERSION, else git describe of a clone
crit_version=${CRI_TOOLS_VERSION:-$(git -C "$CRI_TOOLS" describe --tags 2>/dev/null || true)}
modflag=
[[ -d $CRI_TOOLS/vendor ]] && modflag=-mod=vendor
say "building critest and crictl from $CRI_TOOLS (${crit_version:-unknown version})"
(
	cd "$CRI_TOOLS"
	ld="-X sigs.k8s.io/cri-tools/pkg/version.Version=${crit_version:-unknown}"
	CGO_ENABLED=0 GOFLAGS= $GO test -c $modflag -trimpath -ldflags "$ld" -o "$BIN/critest" ./cmd/critest
	CGO_ENABLED=0 GOFLAGS= $GO build $modflag -trimpath -ldflags "$ld" -o "$BIN/crictl" ./cmd/crictl
)

# ------------------------------------------------------------ work dir

W=$(mktemp -d /tmp/critest.XXXXXX)
# Searchable by others (not listable): runc finds a user-namespaced pod's
# rootfs under --root from inside the namespace, where root is "others".
chmod 0711 "$W"
mkdir -p "$W"/{bin,stage,state,journal,root,runc,cni,ipam,logs} "$OUT"
SOCK=$W/cri.sock
SUFFIX=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
BRIDGE=crit$SUFFIX
DAEMON_PID= REGISTRY_PID= CRITEST_PID= PROXY_PID=

stop_pid() { # stop_pid PID: stop a process this script started and reap it
	local pid=$1 i
	[[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null || true
}

cleanup() {
	local rc=$? pid p m left
	set +e
	trap - EXIT INT TERM
	say "cleanup"
	stop_pid "$CRITEST_PID"
	stop_pid "$PROXY_PID"
	if [[ -n $DAEMON_PID ]] && kill -0 "$DAEMON_PID" 2>/dev/null && [[ -S $SOCK ]]; then
		# what critest left behind, removed as kubelet would (CNI DEL included)
		timeout 120 "$BIN/crictl" --config "$W/crictl.yaml" rmp --all --force >"$W/logs/cleanup-rmp.log" 2>&1
	fi
	stop_pid "$DAEMON_PID"
	# shims outlive the daemon by design: stop the ones of this run (our
	# shim binary, our work dir on their command line), then any container
	# runc still has
	for pid in $(grep -lsF "$W/" /proc/[0-9]*/cmdline | cut -d/ -f3); do
		[[ $(readlink "/proc/$pid/exe" 2>/dev/null) == "$BIN/containerd-shim" ]] && kill -KILL "$pid" 2>/dev/null
	done
	for p in $("$BIN/runc" --root "$W/runc" list -q 2>/dev/null); do
		"$BIN/runc" --root "$W/runc" delete --force "$p" >/dev/null 2>&1
	done
	# mounts under the work dir (overlays, shm, netns pins), deepest first
	left=$(awk -v d="$W/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r)
	for m in $left; do umount -l "$m" 2>/dev/null; done
	[[ -n $left ]] && say "unmounted what the daemon left under $W: $(echo $left | wc -w) mounts"
	ip link del "$BRIDGE" 2>/dev/null
	stop_pid "$REGISTRY_PID"
	cp -f "$W"/logs/* "$OUT"/ 2>/dev/null
	if [[ ${KEEP:-} == 1 ]]; then
		say "work dir kept: $W"
	else
		rm -rf "$W"
	fi
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ------------------------------------------------------------ 2. images

# Debian packages: busybox (the dynamically linked build: its sh runs
# external commands by exec, which the MaskedPaths spec relies on; the
# busybox-static build runs applets in-process) and nginx.
mkdir -p "$CACHE"
for pkg in busybox nginx; do
	if ! ls "$CACHE"/${pkg}_*.deb >/dev/null 2>&1; then
		say "apt-get download $pkg"
		(cd "$CACHE" && apt-get download -q "$pkg" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2) ||
			die "apt-get download $pkg failed"
	fi
done
DEB=$W/deb
mkdir -p "$DEB"
for d in "$CACHE"/busybox_*.deb "$CACHE"/nginx_*.deb; do dpkg-deb -x "$d" "$DEB"; done

S=$W/stage
# copy_bin SRC DEST_ROOT DEST_PATH: a binary and every library ldd names
# (from this Debian host), at the same paths, unless the base has it.
copy_bin() {
	local src=$1 root=$2 dest=$3 lib
	install -D -m 0755 "$src" "$root$dest"
	for lib in $(ldd "$src" | awk '/=> \// {print $3} /^\t\/[^ ]*ld-linux/ {print $1}'); do
		[[ -e $S/busybox$lib || -e $root$lib ]] && continue
		install -D -m 0755 "$(readlink -f "$lib")" "$root$lib"
	done
}

say "staging image trees"
B=$S/busybox
mkdir -p "$B"/{bin,etc,home,root,tmp,usr/bin,usr/sbin,var/spool/mail,var/www,run,proc,sys,dev}
chmod 1777 "$B/tmp"
chmod 0700 "$B/root"
ln -s ../run "$B/var/run"
copy_bin "$DEB/bin/busybox" "$B" /bin/busybox
for a in $("$B/bin/busybox" --list); do
	[[ -e $B/bin/$a ]] || ln "$B/bin/busybox" "$B/bin/$a"
done
copy_bin "$(command -v pgrep)" "$B" /usr/bin/pgrep
copy_bin "$(command -v ipcs)" "$B" /usr/bin/ipcs
# the users and groups of the busybox image
cat >"$B/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
daemon:x:1:1:daemon:/usr/sbin:/bin/false
bin:x:2:2:bin:/bin:/bin/false
sys:x:3:3:sys:/dev:/bin/false
sync:x:4:100:sync:/bin:/bin/sync
mail:x:8:8:mail:/var/spool/mail:/bin/false
www-data:x:33:33:www-data:/var/www:/bin/false
operator:x:37:37:Operator:/var:/bin/false
nobody:x:65534:65534:nobody:/home:/bin/false
EOF
cat >"$B/etc/group" <<'EOF'
root:x:0:
daemon:x:1:
bin:x:2:
sys:x:3:
adm:x:4:
tty:x:5:
disk:x:6:
lp:x:7:
mail:x:8:
kmem:x:9:
wheel:x:10:root
cdrom:x:11:
dialout:x:18:
floppy:x:19:
video:x:28:
audio:x:29:
tape:x:32:
www-data:x:33:
operator:x:37:
utmp:x:43:
plugdev:x:46:
staff:x:50:
lock:x:54:
netdev:x:82:
users:x:100:
nogroup:x:65534:
EOF
printf 'passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n' >"$B/etc/nsswitch.conf"

# nginx (Debian's, with its libraries): the e2e nginx image's behaviour the
# specs use: a master process titled "nginx: master process ...", the pid
# file /var/run/nginx.pid, a page on port 80 (12003 for hostnet-nginx).
stage_nginx() { # stage_nginx DIR PORT
	local N=$1 port=$2
	copy_bin "$DEB/usr/sbin/nginx" "$N" /usr/sbin/nginx
	mkdir -p "$N"/{etc/nginx,usr/share/nginx/html,var/log/nginx,var/lib/nginx,var/cache/nginx}
	cat >"$N/etc/nginx/nginx.conf" <<EOF
user www-data;
worker_processes 1;
pid /var/run/nginx.pid;
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
		listen $port;
		root /usr/share/nginx/html;
		index index.html;
	}
}
EOF
	printf '<html><body><h1>Welcome to nginx!</h1></body></html>\n' >"$N/usr/share/nginx/html/index.html"
}
stage_nginx "$S/nginx" 80
stage_nginx "$S/hostnet-nginx" 12003

# httpd: busybox's httpd applet stands in for Apache (the specs only fetch
# the page on port 80, look for "httpd" in the log and exec echo).
H=$S/httpd
mkdir -p "$H/usr/local/bin" "$H/usr/local/apache2/htdocs"
cat >"$H/usr/local/bin/httpd-foreground" <<'EOF'
#!/bin/sh
echo "httpd-foreground: busybox httpd serving /usr/local/apache2/htdocs on port 80" >&2
exec httpd -f -v -p 80 -h /usr/local/apache2/htdocs
EOF
chmod 0755 "$H/usr/local/bin/httpd-foreground"
printf '<html><body><h1>It works!</h1></body></html>\n' >"$H/usr/local/apache2/htdocs/index.html"

# nonewprivs: a setuid-root program printing its effective uid.
mkdir -p "$S/nonewprivs/usr/local/bin"
CGO_ENABLED=0 $GO build -trimpath -o "$S/nonewprivs/usr/local/bin/nnp" ./integration/critest/nnp
chmod 4755 "$S/nonewprivs/usr/local/bin/nnp"

# ------------------------------------------------------------ registry

$GO build -o "$W/bin/registry" ./integration/critest/registry
if (exec 3<>/dev/tcp/127.0.0.1/5000) 2>/dev/null; then
	die "127.0.0.1:5000 is in use: the mirrors point there"
fi
"$W/bin/registry" -addr "$REGISTRY_ADDR" -stage "$S" -ready "$W/registry.ready" >"$W/logs/registry.log" 2>&1 &
REGISTRY_PID=$!
for i in $(seq 600); do
	[[ -s $W/registry.ready ]] && break
	kill -0 "$REGISTRY_PID" 2>/dev/null || { cat "$W/logs/registry.log" >&2; die "registry exited"; }
	sleep 0.2
done
[[ -s $W/registry.ready ]] || die "registry did not push its images"
say "registry on $REGISTRY_ADDR: $(wc -l <"$W/registry.ready") images"

# ------------------------------------------------------------ 3. daemon

# a /24 no route uses yet
for i in $(seq 50); do
	SUBNET=10.$((200 + RANDOM % 50)).$((RANDOM % 256)).0/24
	ip route | grep -q "^${SUBNET%.0/24}\." || break
done
cat >"$W/cni/10-critest.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "critest-$SUFFIX", "plugins": [
  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$SUBNET"}]], "dataDir": "$W/ipam",
            "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
EOF
say "starting the daemon (bridge $BRIDGE, $SUBNET, work dir $W)"
"$BIN/containerd" --debug \
	--state-dir "$W/state" --journal-dir "$W/journal" --listen "unix://$W/api.sock" \
	--runtime "$BIN/runc" --runtime-args "--root=$W/runc" --shim "$BIN/containerd-shim" \
	--cri-listen "$SOCK" --root "$W/root" \
	--cni-bin-dir /usr/lib/cni --cni-conf-dir "$W/cni" \
	--registry-mirror "registry.k8s.io=http://$REGISTRY_ADDR" \
	--registry-mirror "gcr.io=http://$REGISTRY_ADDR" \
	--insecure-registry "$REGISTRY_ADDR" \
	--sandbox-pause "$BIN/pause" >"$W/logs/daemon.log" 2>&1 &
DAEMON_PID=$!
for i in $(seq 100); do
	[[ -S $SOCK ]] && break
	kill -0 "$DAEMON_PID" 2>/dev/null || { tail -20 "$W/logs/daemon.log" >&2; die "daemon exited"; }
	sleep 0.1
done
[[ -S $SOCK ]] || die "no CRI socket after 10 s"
printf 'runtime-endpoint: unix://%s\nimage-endpoint: unix://%s\ntimeout: 60\n' "$SOCK" "$SOCK" >"$W/crictl.yaml"
crictl() { "$BIN/crictl" --config "$W/crictl.yaml" "$@"; }
crictl version >&2 || die "crictl version failed"

# Diagnostic only (CRITEST_PROXY=1): critest talks to the daemon through
# integration/critest/cgroupfs-proxy, which forwards every call as it is but
# answers RuntimeConfig with the cgroupfs driver while the daemon answers
# Unimplemented (critest otherwise puts every pod under "/test.slice").
ENDPOINT=unix://$SOCK
if [[ ${CRITEST_PROXY:-} == 1 ]]; then
	$GO build -o "$W/bin/cgroupfs-proxy" ./integration/critest/cgroupfs-proxy
	"$W/bin/cgroupfs-proxy" -listen "$W/proxy.sock" -backend "$SOCK" >"$W/logs/proxy.log" 2>&1 &
	PROXY_PID=$!
	for i in $(seq 50); do [[ -S $W/proxy.sock ]] && break; sleep 0.1; done
	[[ -S $W/proxy.sock ]] || die "cgroupfs-proxy did not start"
	ENDPOINT=unix://$W/proxy.sock
	say "CRITEST_PROXY=1: critest goes through cgroupfs-proxy (not a conformance run)"
fi

# ------------------------------------------------------------ 4. critest

# Skipped on purpose (nothing else is):
# - AppArmor: the kernel has no AppArmor (the specs would skip themselves);
#   SELinux specs are not even registered without SELinux.
# - "public image with digest": pins a digest of the real
#   gcr.io/k8s-staging-cri-tools/test-image-digest; an image rebuilt offline
#   cannot have it.
SKIP='\[k8s\.io\] AppArmor|public image with digest should be pulled and removed'
say "running critest (output: $OUT/critest.log)"
set +e
(cd "$W" && exec "$BIN/critest" --config "$W/crictl.yaml" \
	--runtime-endpoint "$ENDPOINT" --image-endpoint "$ENDPOINT" \
	-ginkgo.skip "$SKIP" -ginkgo.v -ginkgo.no-color -ginkgo.timeout 2h \
	-ginkgo.junit-report "$W/logs/junit.xml" ${CRITEST_FOCUS:+"-ginkgo.focus=$CRITEST_FOCUS"} \
	${CRITEST_ARGS:-}) >"$W/logs/critest.log" 2>&1 &
CRITEST_PID=$!
wait "$CRITEST_PID"
CRITEST_RC=$?
CRITEST_PID=
set -e
# summary.txt: the counts, then every spec with its state (from the junit report)
{
	grep -E '^(Ran |FAIL!|SUCCESS!)' "$W/logs/critest.log" || echo "no ginkgo summary: see critest.log"
	sed -n 's/.*<testcase name="\[It\] \([^"]*\)" classname="[^"]*" status="\([a-z]*\)".*/\2 \1/p' "$W/logs/junit.xml" 2>/dev/null |
		sed 's/&#39;/'"'"'/g; s/&quot;/"/g; s/&amp;/\&/g' | sort
} >"$W/logs/summary.txt"
head -2 "$W/logs/summary.txt" >&2
grep -E '^(failed|panicked|timedout|interrupted) ' "$W/logs/summary.txt" >&2 || true
say "critest exit status $CRITEST_RC; results in $OUT"
exit $CRITEST_RC
