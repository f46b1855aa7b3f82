# Every target is a thin wrapper around a go command: read it and run the
# same thing without make. Only Go is needed; the tests build the crossplane
# CLI and everything else they drive from the Go module proxy.

# Render every example under example/ through the real crossplane CLI
# against this function, run locally.
.PHONY: render
render:
	go run ./test/e2e/cmd/render

# The fast proof of the function itself: unit tests, fuzz seeds, render
# goldens through the real crossplane CLI and upstream CRD validation.
# -short skips the slow suites below.
.PHONY: test
test:
	go test -short -timeout 30m ./...

# The slow suites: the control plane on loopback, the model of the
# controllers, the load test and the package build.
.PHONY: test-slow
test-slow:
	go test -timeout 80m ./test/controlplane/... ./test/sim/... ./test/load/... ./test/xpkg/...

# golangci-lint (a tool of tools/lint) and go mod tidy, as CI runs them.
.PHONY: lint
lint:
	go tool -modfile=tools/lint/go.mod golangci-lint run ./...
	go mod tidy -diff

# Regenerate the Input's deepcopy code and CRD (package/input), and the
# XRDs (package/configuration/*/xrd.yaml) from the spec and status types.
.PHONY: generate
generate:
	go generate -tags generate ./internal/input ./internal/xrd

# The control-plane suite alone, with its timeline (also part of make test-slow).
.PHONY: controlplane
controlplane:
	go test -v -count=1 -timeout 60m -run '^TestControlPlane$$' ./test/controlplane

# The control-plane suite with the older pair of controllers, Crossplane
# v2.2.0 and provider-kubernetes v1.3.1 (the default is v2.3.0 and v1.4.1),
# each built from its own tools module. Not part of make test-slow.
.PHONY: controlplane-older
controlplane-older:
	CONTROLPLANE_CONTROLLERS=older go test -v -count=1 -timeout 60m -run '^TestControlPlane$$' ./test/controlplane

# The README's Quick start, steps 3 to 6, followed as written with kubectl and
# the crossplane CLI on a control plane of its own (also part of make test-slow).
.PHONY: controlplane-quickstart
controlplane-quickstart:
	go test -v -count=1 -timeout 40m -run '^TestQuickStart$$' ./test/controlplane

# docs/mtls.md's "Set it up" after Quick start steps 3 and 4, with
# cert-manager's controllers on a control plane of its own (also part of
# make test-slow).
.PHONY: controlplane-mtls
controlplane-mtls:
	go test -v -count=1 -timeout 40m -run '^TestMutualTLS$$' ./test/controlplane

# SCALE ModelRoutes (100 unless SCALE=N says otherwise) on one gateway, on
# a control plane of their own: the reconciles until each route first
# routes, the time until the last route follows a rollout, the API
# server's writes at rest and during it, and how long a rotated key takes
# to reach the gateway cluster. Not part of make test-slow, whose packages
# share the cores: CI (.ci/run) runs it on its own after them, at 100. Its
# goals are logged, not failed (docs/runs.md has what is known). The waits
# for every route grow with SCALE beyond 100; the test deadline does not:
# raise SCALE_TIMEOUT with it. SCALE_LASTING_REST=10m
# adds, at the end, a window of that length twelve minutes after the
# rollout, past the drift checks it caused: the rest that lasts (about 22
# minutes more). Ten minutes is one period of a ready route's TTL; a
# shorter window can fall on a wave of routes whose TTLs fell in step.
SCALE ?= 100
SCALE_TIMEOUT ?= 60m
.PHONY: controlplane-scale
controlplane-scale:
	CONTROLPLANE_SCALE=$(SCALE) $(if $(SCALE_LASTING_REST),CONTROLPLANE_SCALE_LASTING_REST=$(SCALE_LASTING_REST)) go test -v -count=1 -timeout $(SCALE_TIMEOUT) -run '^TestScale$$' ./test/controlplane

# The fault soak (test/controlplane/soak_test.go): SOAK long (10m), its
# seed printed first; SOAK_SEED=<seed> replays its schedules. The run takes
# about SOAK plus ten minutes (the control plane, the routes, the recovery
# and the rest after it): give a longer soak a longer SOAK_TIMEOUT, such as
# SOAK=60m SOAK_TIMEOUT=90m.
SOAK ?= 10m
SOAK_TIMEOUT ?= 60m
.PHONY: controlplane-soak
controlplane-soak:
	CONTROLPLANE_SOAK=$(SOAK) $(if $(SOAK_SEED),CONTROLPLANE_SOAK_SEED=$(SOAK_SEED)) go test -v -count=1 -timeout $(SOAK_TIMEOUT) -run '^TestSoak$$' ./test/controlplane

# Run the control-plane suite once per deliberate break of the function
# (test/controlplane/breaks_test.go): every run must fail where the break
# says it is caught, and leave no process behind. Not part of make test.
.PHONY: controlplane-breaks
controlplane-breaks:
	go test -v -count=1 -timeout 150m -run '^TestBreaksAreCaught$$' ./test/controlplane -args -breaks

# Refresh the end-to-end golden files after an intended change of output.
.PHONY: golden
golden:
	go test ./test/e2e -run TestRender -update

# Benchmarks in process: compare runs with benchstat.
.PHONY: bench
bench:
	go test -run '^$$' -bench . -skip '^BenchmarkGRPC$$' -benchmem -count 6 ./fn/ ./internal/decode/ ./internal/rollout/ ./internal/structcache/

# One RunFunction call over loopback gRPC, served as cmd/function serves it,
# beside the protocol floor (a function that returns response.To) fed the
# same request, in alternating reps: each one's median call and their ratio
# (docs/speed.md). benchstat -ignore /rep -col /server puts them side by side.
.PHONY: bench-grpc
bench-grpc:
	go test -run '^$$' -bench '^BenchmarkGRPC$$' -benchmem -count 1 ./fn/

# Build the runtime image tarball, the Function package and the Configuration
# package (package/configuration: the XRDs and Compositions) into _output/.
.PHONY: xpkg
xpkg:
	go -C test/tools run ./xpkg
