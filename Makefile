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

GOFILES := $(shell find . -name '*.go' -not -path './bin/*')

.PHONY: all build test lint vet fmt-check demo bench reliability clean

all: build

build: $(BIN)/containerd $(BIN)/containerd-shim $(BIN)/ctr $(BIN)/runc $(BIN)/testinit $(BIN)/mkbundle

$(BIN)/containerd: $(GOFILES) go.mod go.sum
	$(GO) build -ldflags '$(LDFLAGS)' -o $@ ./containerd

$(BIN)/ctr: $(GOFILES) go.mod go.sum
	$(GO) build -ldflags '$(LDFLAGS)' -o $@ ./ctr

# The shim is one process per container: built static and stripped to keep it small.
$(BIN)/containerd-shim: $(GOFILES) go.mod go.sum
	CGO_ENABLED=0 $(GO) build -ldflags '-s -w' -trimpath -o $@ ./shim

# runc from the version pinned in go.mod (a `tool` directive); needs cgo for
# nsenter, and libseccomp-dev (with pkg-config) for the `seccomp` tag, so that
# bundles with a seccomp profile run as under a distribution's runc.
$(BIN)/runc: go.mod go.sum Makefile
	@pkg-config --exists libseccomp || { echo "bin/runc needs libseccomp-dev and pkg-config: apt-get install libseccomp-dev pkg-config" >&2; exit 1; }
	CGO_ENABLED=1 $(GO) build -tags seccomp -trimpath -o $@ github.com/opencontainers/runc

# The static init of every test rootfs.
$(BIN)/testinit: integration/testinit/main.go
	CGO_ENABLED=0 $(GO) build -o $@ ./integration/testinit

$(BIN)/mkbundle: $(GOFILES)
	$(GO) build -o $@ ./integration/mkbundle

# Builds everything, then runs a container, shows events and a replay,
# crashes and restarts the daemon (see integration/demo/demo.sh).
demo: build
	./integration/demo/demo.sh

lint: fmt-check vet

fmt-check:
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path './bin/*')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# The whole suite, root tests included, with the race detector.
test: build lint
	$(GO) test -race -count=1 -timeout 25m ./...

# Benchmarks side by side with bare runc (root; about 4 minutes here,
# bounded to 15): prints "name value unit" lines, writes bench/RESULTS.md.
bench: build
	$(GO) run ./bench/cmd/bench -out bench/RESULTS.md

# The reliability suite in full mode (root): chaos with >= 20 daemon
# SIGKILLs, journal faults, bad input, leaks over 1000 cycles, a slow
# subscriber, then each fuzz target for 20 s. `make test` runs its short
# mode (go test ./bench/reliability).
reliability: build
	$(GO) run ./bench/cmd/reliability -fuzztime 20s

clean:
	rm -rf $(BIN)

-include Makefile.proto
