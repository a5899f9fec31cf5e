# Build and test entry points. `make demo` and `make test` are the two
# commands a new user runs (see README.md).

SHELL := /bin/bash
GO ?= go
BIN := $(CURDIR)/bin
VERSION ?= 0.2.9-evj
REVISION := $(shell git rev-parse --short HEAD 2>/dev/null)
LDFLAGS := -s -w -X github.com/evjournal/containerd/api.Revision=$(REVISION)

# Tests use bin/runc built from the runc pinned in go.mod unless RUNC names one.
RUNC ?= $(BIN)/runc
export RUNC
export SHIM := $(BIN)/containerd-shim
export TESTINIT := $(BIN)/testinit
# CONTAINERD stays unset: the end-to-end suite then builds a -race daemon of
# its own (bin/containerd.race). The fixture rebuilds bin/containerd, ctr and
# pause with this Makefile's flags, so `make bench` after `make test`
# measures the same kind of binary.

GOFILES := $(shell find . -name '*.go' -not -path './bin/*')

.PHONY: all build test lint vet fmt-check staticcheck tidy-check docs-check demo bench reliability clean

all: build

BINARIES := containerd containerd-shim ctr runc runc-rc2 testinit mkbundle pause

build: $(addprefix $(BIN)/,$(BINARIES))

# Each binary by its name as typed from the repo (`make bin/runc`) too: the
# rules below are written for absolute paths, which a relative name does not
# match. A phony alias with no recipe just brings its file up to date.
.PHONY: $(addprefix bin/,$(BINARIES))
$(addprefix bin/,$(BINARIES)): bin/%: $(BIN)/%

# The daemon and ctr are built static (no libc mapped: about 1.5 MiB less
# resident) and without urfave/cli's man page generator (md2man and
# blackfriday: 0.2 MB of binary nobody runs).
DAEMON_BUILD := CGO_ENABLED=0 $(GO) build -tags urfave_cli_no_docs -trimpath

$(BIN)/containerd: $(GOFILES) go.mod go.sum
	$(DAEMON_BUILD) -ldflags '$(LDFLAGS)' -o $@ ./containerd

$(BIN)/ctr: $(GOFILES) go.mod go.sum
	$(DAEMON_BUILD) -ldflags '$(LDFLAGS)' -o $@ ./ctr

# The shim is one process per container: built static and stripped to keep it small.
$(BIN)/containerd-shim: $(GOFILES) go.mod go.sum
	CGO_ENABLED=0 $(GO) build -ldflags '-s -w' -trimpath -o $@ ./shim

# runc from the version pinned in go.mod (a `tool` directive); needs cgo for
# nsenter, and libseccomp-dev (with pkg-config) for the `seccomp` tag, so that
# bundles with a seccomp profile run as under a distribution's runc. With
# `urfave_cli_no_docs`, as runc's own Makefile builds it: without, the
# man-page generator's package init costs every runc and `runc init` start
# about 0.3 ms.
$(BIN)/runc: go.mod go.sum Makefile
	@pkg-config --exists libseccomp || { echo "bin/runc needs libseccomp-dev and pkg-config: apt-get install libseccomp-dev pkg-config" >&2; exit 1; }
	CGO_ENABLED=1 $(GO) build -tags "seccomp urfave_cli_no_docs" -trimpath -o $@ github.com/opencontainers/runc

# runc 1.0.0-rc2, the runc of Docker 1.13 (spec 1.0.0-rc2 bundles, --console
# instead of --console-socket): the second runtime of `make test`. Built
# hermetically from the module proxy: the module zip carries its
# dependencies under Godeps/_workspace, so a GOPATH-mode build of a copy
# (the module cache is read-only) needs nothing else; a few seconds.
# PATCH applied at build time: libcontainer/cgroups/utils.go takes every
# mountinfo entry whose fs type starts with "cgroup" for a v1 hierarchy, so on
# a host with a cgroup2 mount beside the v1 ones (/sys/fs/cgroup/unified) it
# fails every container with "no subsystem for mount". The patch makes it
# skip "cgroup2" entries (fs type "cgroup" exactly); nothing else is changed.
RUNC_RC2 := github.com/opencontainers/runc@v1.0.0-rc2
$(BIN)/runc-rc2: Makefile
	@pkg-config --exists libseccomp || { echo "bin/runc-rc2 needs libseccomp-dev and pkg-config: apt-get install libseccomp-dev pkg-config" >&2; exit 1; }
	set -e; mod=$$($(GO) mod download -json $(RUNC_RC2) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p'); \
	test -d "$$mod"; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	src=$$tmp/src/github.com/opencontainers/runc; mkdir -p $$(dirname $$src); \
	cp -r "$$mod" $$src; chmod -R u+w $$src; \
	sed -i 's/if txt\[sepIdx+3:sepIdx+9\] != "cgroup" {/if !strings.HasPrefix(txt[sepIdx+3:], "cgroup ") {/' $$src/libcontainer/cgroups/utils.go; \
	grep -q 'HasPrefix(txt\[sepIdx+3:\], "cgroup ")' $$src/libcontainer/cgroups/utils.go; \
	cd $$src && GO111MODULE=off GOFLAGS= GOPATH="$$mod/Godeps/_workspace:$$tmp" CGO_ENABLED=1 \
		$(GO) build -tags seccomp -o $@ .

# The static init of every test rootfs.
$(BIN)/testinit: integration/testinit/main.go
	CGO_ENABLED=0 $(GO) build -o $@ ./integration/testinit

# The holder of a pod sandbox's namespaces (pause/), one per pod, run from
# the host rather than an image: static and stripped like the shim.
$(BIN)/pause: pause/main.go go.mod go.sum
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $@ ./pause

$(BIN)/mkbundle: $(GOFILES)
	$(GO) build -o $@ ./integration/mkbundle

# Builds everything, then runs a container, shows events and a replay,
# crashes and restarts the daemon (see integration/demo/demo.sh).
demo: build
	./integration/demo/demo.sh

# Static checks, all of which `make test` runs first: formatting, go vet,
# staticcheck (the version pinned in go.mod as a `tool`), a go.mod/go.sum
# that `go mod tidy` would leave as they are, and docs and comments that
# refer to nothing outside the repository.
lint: fmt-check vet staticcheck tidy-check docs-check

staticcheck:
	$(GO) tool staticcheck ./...

tidy-check:
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy" >&2; exit 1; }

# No numbered issues, work-log stops or paths outside the repository in docs,
# scripts and comments: a reader has only the repository
# (integration/repocheck).
docs-check:
	$(GO) test -count=1 -run TestDocsStandOnTheRepo ./integration/repocheck

fmt-check:
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path './bin/*')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# The whole suite, root tests included, with the race detector; then the
# end-to-end suite again against runc 1.0.0-rc2, its bundles written as
# Docker 1.13 wrote them (the runtime matrix of docs/api.md).
test: build lint
	$(GO) test -race -count=1 -tags failpoints -timeout 25m ./...
	for sync in always none; do \
		SUPERVISOR_JOURNAL_SYNC=$$sync $(GO) test -race -count=1 -tags failpoints -timeout 10m ./supervisor || exit 1; \
	done
	RUNC=$(BIN)/runc-rc2 $(GO) test -race -count=1 -timeout 10m ./integration/e2e

# Benchmarks side by side with bare runc, and the CRI beside containerd 2.x
# (root; about 8 minutes here, bounded to 15): prints "name value unit"
# lines, writes bench/RESULTS.md. One group alone: go run ./bench/cmd/bench
# -only cri (start, exit, journal, journal10m, fanout, cri).
bench: build bench-peer
	$(GO) run ./bench/cmd/bench -out bench/RESULTS.md -peer bench/build/containerd-$(BENCH_PEER_VERSION)

# containerd 2.x, the cri group's peer, built from the Go module proxy
# (cmd/containerd and cmd/containerd-shim-runc-v2 of a pinned release; about
# 3 minutes the first time) into bench/build, kept there. Not part of `make
# test`.
BENCH_PEER_VERSION := v2.3.4
.PHONY: bench-peer
bench-peer:
	GO=$(GO) ./bench/peer/build-containerd.sh $(BENCH_PEER_VERSION) bench/build/containerd-$(BENCH_PEER_VERSION)

# The reliability suite in full mode (root): chaos with >= 20 daemon
# SIGKILLs, journal faults, bad input, leaks over 1000 cycles, a slow
# subscriber, then each fuzz target for 20 s. `make test` runs its short
# mode (go test ./bench/reliability).
reliability: build
	$(GO) run ./bench/cmd/reliability -fuzztime 20s

# A real kubelet (built from the module proxy into bin/kubelet, about 4 min
# the first time) runs a static pod on the daemon through --cri-listen:
# container restarts, daemon and kubelet SIGKILLs, pod removal (root; about
# 5 minutes; not part of `make test`). See docs/kubelet-e2e.md.
.PHONY: kubelet-e2e
kubelet-e2e: build
	GO=$(GO) ./integration/kubelet/run.sh

# The CRI conformance suite of cri-tools (critest) against the daemon's
# --cri-listen, offline: builds critest from a cri-tools checkout (v1.34.0,
# with its vendor/), serves the images it pulls, rebuilt from Debian
# binaries, from a registry on 127.0.0.1:5000 mirrored for registry.k8s.io
# and gcr.io (root; manual, not part of `make test`). See docs/critest.md.
.PHONY: critest
critest: build
	@test -n "$(CRI_TOOLS)" || { echo "usage: make critest CRI_TOOLS=/path/to/cri-tools" >&2; exit 1; }
	GO=$(GO) CRI_TOOLS=$(CRI_TOOLS) ./integration/critest/run.sh

# Kubernetes' node e2e suite (test/e2e_node, its [NodeConformance] specs)
# with the daemon as the node's runtime: the suite's in-process API server
# and etcd, a kubelet on --cri-listen, a CNI network, the images it pulls
# rebuilt offline and served from a local registry (root; manual, not part
# of `make test`; the first run builds the suite, about 10 minutes, and a
# full run takes about an hour here). See docs/node-conformance.md.
.PHONY: node-conformance
node-conformance: build
	GO=$(GO) ./integration/node-conformance/run.sh

clean:
	rm -rf $(BIN)

-include Makefile.proto
