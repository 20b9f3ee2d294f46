# fleetd — developer entry points. `make run` and `make test` are the two
# commands a new machine needs; everything else is for working on fleetd.

GO        ?= go
BIN       := bin/fleetd
PKGS      := ./...
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X github.com/fleetd-dev/fleetd/internal/version.Version=$(VERSION)
FUZZTIME  ?= 50000x

.PHONY: all build run demo-repo demo-manifests run-cluster test lint fmt bench fuzz chaos clean

all: lint test build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/fleetd

# The embedded default: the simulated herdr plus the example manifests. The
# example tenant's credential is a demo value unless you export your own.
# fleetd serves DEMO_MANIFESTS, a scratch copy of manifests/*.yaml made by
# the first `make run` (`make clean` removes it, the next run copies the
# examples again), so that what you apply or delete from the banner never
# edits a git-tracked file. LISTEN is the listener's address: `make run
# LISTEN=127.0.0.1:18080` when 8080 is taken.
# The example member builder works in a git worktree of a throwaway
# repository, DEMO_REPO (manifests/builder.yaml names /tmp/fleetd-demo-repo;
# the scratch copy names DEMO_REPO): created here with one commit on main
# when missing (docs/worktrees.md), after removing the worktrees an earlier
# one left (DEMO_REPO.worktrees: fleetd itself never removes a checkout it
# finds in a worktree's way).
# serve runs through env, not a shell, so that make runs it itself: Ctrl-C
# then ends it as fleetd ends, without make reporting the recipe
# "Interrupt"ed (cmd/fleetd's TestMakeRun_ACleanCloneStaysClean).
ACME_FLEETD_TOKEN ?= sim-demo-credential
LISTEN            ?= 127.0.0.1:8080
DEMO_REPO         ?= /tmp/fleetd-demo-repo
DEMO_MANIFESTS    := $(CURDIR)/bin/manifests
run: build demo-repo demo-manifests
	./$(BIN) validate $(DEMO_MANIFESTS)
	env ACME_FLEETD_TOKEN=$(ACME_FLEETD_TOKEN) ./$(BIN) serve --herdr=sim --manifests $(DEMO_MANIFESTS) --listen $(LISTEN)

demo-manifests:
	@if [ ! -d $(DEMO_MANIFESTS) ]; then \
		mkdir -p $(DEMO_MANIFESTS).tmp && \
		for f in manifests/*.yaml; do sed 's#/tmp/fleetd-demo-repo#$(DEMO_REPO)#g' $$f > $(DEMO_MANIFESTS).tmp/$${f#manifests/}; done && \
		mv $(DEMO_MANIFESTS).tmp $(DEMO_MANIFESTS) && \
		echo "copied manifests/*.yaml to $(DEMO_MANIFESTS), the scratch copy make run serves (make clean removes it)"; \
	fi

demo-repo:
	@if [ ! -d $(DEMO_REPO)/.git ]; then \
		if [ -d $(DEMO_REPO).worktrees ]; then \
			rm -rf $(DEMO_REPO).worktrees && echo "removed $(DEMO_REPO).worktrees, the worktrees of an earlier throwaway demo repository"; \
		fi && \
		git init -q $(DEMO_REPO) && git -C $(DEMO_REPO) symbolic-ref HEAD refs/heads/main && \
		echo "a throwaway repository for make run's worktree example" > $(DEMO_REPO)/README && \
		git -C $(DEMO_REPO) add README && \
		git -C $(DEMO_REPO) -c user.name=fleetd -c user.email=demo@fleetd.invalid commit -q -m "initial commit" && \
		echo "created $(DEMO_REPO), a throwaway git repository for the example member builder's worktree"; \
	fi

# A fleet of two nodes on one machine (docs/multi-host.md): an embedded
# single-member etcd on loopback (cmd/etcd-demo, built into bin/; etcd's
# server is never in $(BIN)) and two `fleetd serve --store etcd --herdr=sim`
# nodes with the members of manifests/cluster placed on both, on free
# loopback ports (with LISTEN given, `make run-cluster
# LISTEN=127.0.0.1:18080`, the first node listens there and the second on
# the next port). Ctrl-C stops it all.
run-cluster: build
	$(GO) build -o bin/etcd-demo ./cmd/etcd-demo
	./bin/etcd-demo -fleetd $(BIN)$(if $(filter command line environment,$(origin LISTEN)), -listen $(LISTEN))

# The slowest packages are named first so that go test starts them first:
# named last (./... in path order), they ran on alone at the end. Their
# tests mostly wait (on processes, etcd's elections, lease expiries), not
# compute: four packages at once (-p; the default is one per core), with
# four parallel tests each (-parallel), keep two cores busy.
SLOW_TESTS := ./test/multihost ./cmd/fleetd ./internal/daemon ./controllers ./internal/store/etcdstore ./cmd/etcd-demo
# GORACE atexit_sleep_ms=0: a -race binary sleeps a second as it exits
# (the race runtime's default), and tests run their own binary as fleetd
# or as a daemon to kill (cmd/fleetd, internal/daemon) many times, one
# after another: cmd/fleetd's tests took 40 s with the sleep, 30 without.
# A race found is still reported, and still fails the process (exit 66).
# What GORACE says besides is kept, and overrides.
test:
	GORACE="atexit_sleep_ms=0 $$GORACE" $(GO) test -race -count=1 -p 4 -parallel 4 $(SLOW_TESTS) $(PKGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go') $$(git ls-files --others --exclude-standard '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

# The fleet benchmarks (package bench) against the fake herdr, the
# multi-host ones (package multihost: fleetd nodes on a loopback etcd of
# three members), then the whole-process figures of $(BIN), printed as one
# table (docs/performance.md explains it). Knobs go to the benchmarks, e.g.
# BENCHARGS='-sizes 100,500 -ready-sizes 100 -latency 2ms' and
# FLEETBENCHARGS='-fleet-members 50 -lost-ttl 3s -idle-window 10s -send-rounds 50 -scale-nodes 3,10'; the raw
# output stays in bin/bench.txt. FleetScale (3, 10 and 30 simulated nodes
# of 50 members) adds about 3 minutes on a quiet machine, most of it the
# 30 nodes; -scale-nodes 3,10 leaves those out.
BENCHARGS      ?=
FLEETBENCHARGS ?=
BENCHMEMBERS   ?= 1000
bench: build
	@echo "running the fleet benchmarks (3.5–4 minutes on a quiet machine, FleetScale about 2 of them; more under load)..."
	@$(GO) test -run '^$$' -bench . -benchtime 1x -count 1 -timeout 30m ./test/bench/ -args $(BENCHARGS) > bin/bench.txt 2>&1 || { cat bin/bench.txt; exit 1; }
	@$(GO) test -run '^$$' -bench . -benchtime 1x -count 1 -timeout 30m ./test/multihost/ -args $(FLEETBENCHARGS) >> bin/bench.txt 2>&1 || { cat bin/bench.txt; exit 1; }
	$(GO) run ./test/bench/cmd/benchtable -fleetd $(BIN) -members $(BENCHMEMBERS) < bin/bench.txt

# Every `func FuzzXxx` in a _test.go file runs for FUZZTIME, one target after
# another (go test takes one -fuzz target per run). FUZZTIME is a count of
# inputs: a time-based -fuzztime can end in a bare "context deadline exceeded"
# on a loaded machine.
fuzz:
	@set -e; grep -rHo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' . | \
	while IFS=: read -r file decl; do \
		name=$${decl#func }; pkg=./$$(dirname $${file#./}); \
		echo "== $$pkg $$name"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

# The seeded chaos test, long form: CHAOS_SEEDS seeds one after another
# (from CHAOS_FIRST), CHAOS_STEPS faults each (herdr, fleetd and pane
# crashes, manifest edits, a slow MCP client, a flood from one worker; see
# test/chaos/doc.go), about 40 s. `make test` runs a short form (3 seeds of
# 30 steps, a few seconds).
# A failure prints its seed; rerun it with
# `go test -race -run TestChaos ./test/chaos/ -chaos.seed=N -chaos.steps=80`.
# CHAOS_FLAGS adds the faults kept out of the default schedule, e.g.
# CHAOS_FLAGS=-chaos.restore (herdr restarts with session restore).
#
# Then the fleet's long form (test/multihost's TestFleetChaos: three fleetd
# nodes on a three-member etcd; nodes killed and restarted, nodes
# partitioned from etcd through a fault proxy (black hole, half-open,
# delay: their fence), etcd members stopped, the quorum lost, members
# applied and deleted), CHAOS_FLEET_SEEDS
# seeds of CHAOS_FLEET_STEPS steps from CHAOS_FIRST, a few minutes; `make
# test` runs one seed of 6 steps. Rerun a failing seed with
# `go test -race -run TestFleetChaos ./test/multihost/ -chaos.seed=N -chaos.steps=M`.
CHAOS_SEEDS ?= 20
CHAOS_FIRST ?= 1
CHAOS_STEPS ?= 80
CHAOS_FLAGS ?=
CHAOS_FLEET_SEEDS ?= 10
CHAOS_FLEET_STEPS ?= 20
CHAOS_FLEET_FLAGS ?=
chaos:
	$(GO) test -race -count=1 -run TestChaos ./test/chaos/ -chaos.seeds=$(CHAOS_SEEDS) -chaos.first=$(CHAOS_FIRST) -chaos.steps=$(CHAOS_STEPS) $(CHAOS_FLAGS)
	$(GO) test -race -count=1 -timeout 30m -run TestFleetChaos ./test/multihost/ -chaos.seeds=$(CHAOS_FLEET_SEEDS) -chaos.first=$(CHAOS_FIRST) -chaos.steps=$(CHAOS_FLEET_STEPS) $(CHAOS_FLEET_FLAGS)

clean:
	rm -rf bin
