# distlock: the two commands a newcomer needs are `make demo` (the main job:
# compare the backends side by side on this machine) and `make test` (every
# test, against real servers). Both install what is missing first.

GO            ?= go
STATICCHECK   ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
# The container pass runs the sandbox's own tests (each server kind and
# topology, its faults and TLS, in containers) and every driver's
# conformance suite and harness checks (DOCKER_RUN): the project's promise
# is that every backend passes the suite against servers started through
# testcontainers. The drivers' other server tests run in the local pass
# against the same server builds (the images are made from the same
# Debian packages); DOCKER_RUN=. runs them all in containers too.
DOCKER_SANDBOX_PKGS ?= ./sandbox/...
DOCKER_DRIVER_PKGS  ?= ./redislock/... ./sqllock/... ./zklock/... ./etcdlock/...
DOCKER_RUN          ?= ^(TestConformance|TestHarnessHooks)
TEST_TIMEOUT  ?= 25m
# Set REQUIRE_DOCKER=1 to fail, instead of skip, the container pass when no
# Docker engine is reachable (CI does).
REQUIRE_DOCKER ?= 0
DEMO_OUT      ?= distlock-report
# make demo: 3 rounds of every workload on every store, with each store's
# other lock libraries (--peers) and bare round trip; about 5 minutes on 2 cores.
DEMO_FLAGS    ?= --rounds 3 --duration 1500ms --ttl 4s --peers
# The command (cmd/distlock: run, hold, elect, status, list) is a module of
# its own, so the library's go.mod stays free of CLI dependencies; the
# comparison (bench/cmd/distlock-bench, its engine in bench/internal) lives
# in the bench module with the peer libraries, plotting and the embedded
# etcd server, so that none of them rides in the CLI's binary. `go mod
# tidy` must leave each go.mod unchanged.
CMD_MOD       ?= cmd/distlock
# Test infrastructure is out of the library module too, so that a user of
# one driver gets no container stack in its go.sum (docs/architecture.md):
# faults/ (the history checker, porcupine) is a module, and so is the
# sandbox's container broker, sandbox/containers (testcontainers-go),
# which the sandbox's docker provider builds and runs as a child process.
FAULTS_MOD    ?= faults
BROKER_MOD    ?= sandbox/containers
BENCH_MOD     ?= bench
# The bench module's packages with tests to run in make test (its peer
# benchmarks run in make bench).
BENCH_TEST_PKGS ?= ./cmd/... ./internal/...
MODULES       ?= . $(CMD_MOD) $(BENCH_MOD) $(FAULTS_MOD) $(BROKER_MOD)
# The container pass skips what would only repeat the local pass: a test
# that starts its servers with the local provider whatever DISTLOCK_SANDBOX
# says (TestConformanceModuleEtcd: etcd 3.5+ built from its module), and
# the Redis conformance runs that differ from another run against the same
# containers only in the driver's wait mode (wait=notify; the local pass
# runs them). Empty: skip nothing.
DOCKER_SKIP   ?= ^(TestConformanceModuleEtcd|TestConformanceNotify|TestConformanceClusterNotify)$$
# How many server packages the container pass tests at once. Their tests
# mostly wait (for TTLs, sessions, restarts) on servers in containers:
# with 2 at a time the test processes used 17% of 2 cores (9m50s), with 4
# at a time 6m50s, so all five run together (the local pass, whose servers
# share the cores, keeps go test's default of one package per core).
DOCKER_P      ?= 5
# Fuzz targets as package:Name; `make fuzz` runs each for FUZZTIME, `make
# test` for FUZZTIME_SHORT (go test runs one fuzz target at a time).
FUZZ_TARGETS  ?= ./backend:FuzzParseURL .:FuzzCheckKey .:FuzzOptions ./internal/keys:FuzzEscape ./internal/redisproto:FuzzKeysFor ./internal/redisproto:FuzzParseAcquire \
                 ./etcdlock:FuzzLockRange ./etcdlock:FuzzTombName ./zklock:FuzzParseName \
                 ./redislock:FuzzURLParams ./sqllock:FuzzURLParamsMySQL ./sqllock:FuzzURLParamsPostgres ./zklock:FuzzURLParams \
                 ./etcdlock:FuzzURLParams ./memlock:FuzzURLParams
# make test fuzzes all but the URL parameter targets (FuzzURLParams*,
# 30-50 s each for 100000 inputs here; the whole .ci/run took 1856 s with
# them): their seed corpora run as plain tests in every go test, and make
# fuzz runs them for FUZZTIME.
FUZZ_SHORT_TARGETS ?= $(filter-out %:FuzzURLParams %:FuzzURLParamsMySQL %:FuzzURLParamsPostgres,$(FUZZ_TARGETS))
FUZZTIME      ?= 60s
# The short run is a count of inputs, not a duration: a duration-bounded
# fuzz run can end with a spurious "context deadline exceeded" failure when
# the time runs out while a worker is busy (seen in CI); a count has no
# deadline. 30000 inputs take 1-3 s per target here (100000 took 3-10 s;
# the 12 targets with their builds 227 s at load 10).
FUZZTIME_SHORT ?= 30000x
# make faults: how long faults are injected per backend (make test runs the
# same test with a 10 s default). DISTLOCK_FAULTS_SEED and
# DISTLOCK_FAULTS_BACKENDS pass through (docs/testing.md).
FAULTS_DURATION ?= 60s

.PHONY: all deps servers images test test-unit test-local test-docker test-loaded test-loaded-ci fuzz fuzz-short faults lint gosum bench demo clean-containers help

all: test

help:
	@echo "make demo   - compare every backend side by side on this machine (report in $(DEMO_OUT)/)"
	@echo "make test   - install what is missing, run every test with -race, local servers then containers"
	@echo "make faults - every backend under a seeded random fault schedule, judged by the history checker (FAULTS_DURATION=$(FAULTS_DURATION) each)"
	@echo "make test-loaded - the tests again while a CPU hog keeps every core busy (LOADED_PKGS=$(LOADED_PKGS))"
	@echo "make lint   - gofmt, go vet, staticcheck, go mod tidy leaves every go.mod unchanged"
	@echo "make gosum  - go.sum lines a user's module gets from each driver alone"
	@echo "make fuzz   - every fuzz target for FUZZTIME (default 60s) each"
	@echo "make images - build the substitute container images from Debian packages (no registry needed)"
	@echo "make bench  - benchmarks, including peer libraries (bench/ module)"

# Go modules, and on Debian as root the server packages.
deps:
	$(GO) mod download
	$(GO) -C $(CMD_MOD) mod download
	$(GO) -C $(FAULTS_MOD) mod download
	$(GO) -C $(BROKER_MOD) mod download
	$(GO) -C $(BENCH_MOD) mod download
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		scripts/install-servers.sh; \
	else \
		echo "deps: not root on Debian: install redis-server, mariadb-server, etcd-server, libzookeeper-java and a JRE yourself (see docs/sandbox.md)"; \
	fi

servers: deps

# Substitute images for the container provider, built offline (idempotent).
images: deps
	scripts/build-images.sh

# Every test, first with servers as local processes, then the server-backed
# packages again through testcontainers (when a Docker engine is reachable).
# The short fuzzing runs after the container pass, not beside it: beside
# it (both cores fuzzing), the Redis container's conformance lost every
# lease of KeyIndependence (renewals sent late, validity ran out in doubt).
test: deps test-local test-docker fuzz-short

test-unit:
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $$($(GO) list ./... | grep -v -e /sandbox -e /redislock -e /sqllock -e /zklock -e /etcdlock)
	$(GO) -C $(CMD_MOD) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	$(GO) -C $(FAULTS_MOD) test -race -count=1 -timeout $(TEST_TIMEOUT) ./internal/...
	$(GO) -C $(BROKER_MOD) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	$(GO) -C $(BENCH_MOD) test -race -count=1 -timeout $(TEST_TIMEOUT) $(BENCH_TEST_PKGS)

# The root module's packages run the slowest first (LOCAL_FIRST: 315,
# 195, 185, 160, 100, 35 and 30 s in CI), LOCAL_P at a time: their tests
# mostly wait (TTLs, sessions, restarts). With go test's default of one
# package per core, in path order, the pass took about 10 minutes, 6.5
# with these.
LOCAL_FIRST ?= ./sqllock/ ./zklock/ ./etcdlock/ ./redislock/ ./redlock/ ./sandbox/ ./conformance/
LOCAL_P     ?= 3
test-local:
	DISTLOCK_SANDBOX=local $(GO) test -race -count=1 -p $(LOCAL_P) -timeout $(TEST_TIMEOUT) $(LOCAL_FIRST) ./...
	@# The fault suite, and the command's, the broker's and the bench
	@# module's tests, which mostly wait (servers, containers, child
	@# processes): side by side (235, 138, 119 and 74 s one after another).
	@echo "$(GO) -C $(FAULTS_MOD) test ... & $(GO) -C $(CMD_MOD) test ... & $(GO) -C $(BROKER_MOD) test ... & $(GO) -C $(BENCH_MOD) test ..."; \
	DISTLOCK_SANDBOX=local $(GO) -C $(FAULTS_MOD) test -race -count=1 -timeout $(TEST_TIMEOUT) ./... & f=$$!; \
	DISTLOCK_SANDBOX=local $(GO) -C $(CMD_MOD) test -race -count=1 -timeout $(TEST_TIMEOUT) ./... & c=$$!; \
	$(GO) -C $(BROKER_MOD) test -race -count=1 -timeout $(TEST_TIMEOUT) ./... & b=$$!; \
	DISTLOCK_SANDBOX=local $(GO) -C $(BENCH_MOD) test -race -count=1 -timeout $(TEST_TIMEOUT) $(BENCH_TEST_PKGS); rc=$$?; \
	wait $$f || rc=1; wait $$c || rc=1; wait $$b || rc=1; exit $$rc

test-docker:
	@if docker info >/dev/null 2>&1; then \
		$(MAKE) --no-print-directory images && \
		{ DISTLOCK_SANDBOX=docker $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(DOCKER_SANDBOX_PKGS) & sb=$$!; \
		DISTLOCK_SANDBOX=docker $(GO) test -race -count=1 -p $(DOCKER_P) -timeout $(TEST_TIMEOUT) -run '$(DOCKER_RUN)' -skip '$(DOCKER_SKIP)' $(DOCKER_DRIVER_PKGS); rc=$$?; \
		wait $$sb || rc=1; exit $$rc; }; \
	elif [ "$(REQUIRE_DOCKER)" = 1 ]; then \
		echo "test-docker: no Docker engine reachable, and REQUIRE_DOCKER=1" >&2; exit 1; \
	else \
		echo "test-docker: no Docker engine reachable: container pass skipped"; \
	fi

# The tests of LOADED_PKGS with servers as local processes, while a CPU hog
# (stress-ng, or busy loops) keeps every core busy: a test that passes only
# on an idle machine is a defect. `make test-loaded` runs every package;
# .ci/run runs a bounded set (LOADED_PKGS_CI).
LOADED_PKGS    ?= ./...
LOADED_PKGS_CI ?= . ./memlock/... ./conformance/... ./backend/...
test-loaded-ci:
	@$(MAKE) --no-print-directory test-loaded LOADED_PKGS="$(LOADED_PKGS_CI)"

test-loaded: deps
	DISTLOCK_SANDBOX=local scripts/cpu-hog.sh $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(LOADED_PKGS)
	@if [ "$(LOADED_PKGS)" = "./..." ]; then \
		echo "DISTLOCK_SANDBOX=local scripts/cpu-hog.sh $(GO) -C $(FAULTS_MOD) test -race -count=1 -timeout $(TEST_TIMEOUT) ./..."; \
		DISTLOCK_SANDBOX=local scripts/cpu-hog.sh $(GO) -C $(FAULTS_MOD) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...; \
	fi

# Each fuzz target for a bounded time; the seed corpora under
# testdata/fuzz/ also run as plain tests in every go test.
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		echo "fuzz: $${t##*:} ($${t%%:*}) for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$${t##*:}\$$" -fuzztime $(FUZZTIME) "$${t%%:*}" || exit 1; \
	done

fuzz-short:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME_SHORT) FUZZ_TARGETS="$(FUZZ_SHORT_TARGETS)"

# Every backend under a seeded random fault schedule for FAULTS_DURATION
# each; prints per backend the operations, faults by kind, violations,
# double grants and the recovery time after the last heal.
faults: deps
	DISTLOCK_FAULTS_DURATION=$(FAULTS_DURATION) $(GO) -C $(FAULTS_MOD) test -count=1 -timeout 90m -run '^TestFaults$$' -v .

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	@for m in $(CMD_MOD) $(FAULTS_MOD) $(BROKER_MOD); do \
		echo "$(GO) -C $$m vet ./... && $(GO) -C $$m run $(STATICCHECK) ./..."; \
		$(GO) -C $$m vet ./... && $(GO) -C $$m run $(STATICCHECK) ./... || exit 1; \
	done
	$(GO) -C $(BENCH_MOD) vet ./...
	$(GO) -C $(BENCH_MOD) run $(STATICCHECK) $(BENCH_TEST_PKGS)
	@for m in $(MODULES); do \
		[ -f $$m/go.mod ] || continue; \
		echo "$(GO) -C $$m mod tidy -diff"; \
		$(GO) -C $$m mod tidy -diff || { echo "lint: go mod tidy would change $$m/go.mod or go.sum" >&2; exit 1; }; \
	done

# What a user's go.sum gets from each driver: a fresh module importing
# only that driver, go mod tidy, wc -l go.sum (docs/architecture.md).
# TestDriverTestGraphsHoldOnlyTheirStore (in make test) keeps the test
# graphs free of the container stack and of other stores' clients.
gosum:
	scripts/gosum-measure.sh

bench: deps
	$(GO) test -run '^$$' -bench . -benchtime 2s ./...
	@if [ -f bench/go.mod ]; then cd bench && $(GO) test -run '^$$' -bench . -benchtime 2s ./...; fi

# The comparison is its own command (distlock-bench, in the bench module):
# the distlock CLI does not carry it.
demo: deps
	$(GO) -C $(BENCH_MOD) run ./cmd/distlock-bench $(DEMO_FLAGS) --out $(abspath $(DEMO_OUT))

clean-containers:
	scripts/cleanup-containers.sh
