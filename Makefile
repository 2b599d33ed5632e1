# distlock: the two commands a newcomer needs are `make demo` (the main job:
# compare the backends side by side on this machine) and `make test` (every
# test, against real servers). Both install what is missing first.

GO            ?= go
STATICCHECK   ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
# Packages whose tests start real servers through the sandbox.
SERVER_PKGS   ?= ./sandbox/... ./redislock/... ./sqllock/... ./zklock/... ./etcdlock/...
TEST_TIMEOUT  ?= 25m
# Set REQUIRE_DOCKER=1 to fail, instead of skip, the container pass when no
# Docker engine is reachable (CI does).
REQUIRE_DOCKER ?= 0
DEMO_OUT      ?= distlock-report

.PHONY: all deps servers images test test-unit test-local test-docker lint bench demo clean-containers help

all: test

help:
	@echo "make demo   - compare every backend side by side on this machine (report in $(DEMO_OUT)/)"
	@echo "make test   - install what is missing, run every test with -race, local servers then containers"
	@echo "make lint   - gofmt, go vet, staticcheck"
	@echo "make images - build the substitute container images from Debian packages (no registry needed)"
	@echo "make bench  - benchmarks, including peer libraries (bench/ module)"

# Go modules, and on Debian as root the server packages.
deps:
	$(GO) mod download
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
test: deps test-local test-docker

test-unit:
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $$($(GO) list ./... | grep -v -e /sandbox -e /redislock -e /sqllock -e /zklock -e /etcdlock)

test-local:
	DISTLOCK_SANDBOX=local $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...

test-docker:
	@if docker info >/dev/null 2>&1; then \
		$(MAKE) --no-print-directory images && \
		DISTLOCK_SANDBOX=docker $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(SERVER_PKGS); \
	elif [ "$(REQUIRE_DOCKER)" = 1 ]; then \
		echo "test-docker: no Docker engine reachable, and REQUIRE_DOCKER=1" >&2; exit 1; \
	else \
		echo "test-docker: no Docker engine reachable: container pass skipped"; \
	fi

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	@if [ -f bench/go.mod ]; then cd bench && $(GO) vet ./...; fi

bench: deps
	$(GO) test -run '^$$' -bench . -benchtime 2s ./...
	@if [ -f bench/go.mod ]; then cd bench && $(GO) test -run '^$$' -bench . -benchtime 2s ./...; fi

demo: deps
	$(GO) run ./cmd/distlock bench --out $(DEMO_OUT)

clean-containers:
	scripts/cleanup-containers.sh
