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

# 100 ModelRoutes on one gateway, on a control plane of their own: the time
# until the last route follows a rollout, and the API server's writes at
# rest and during it. Not part of make test-slow, whose packages share the
# cores: CI (.ci/run) runs it on its own after them. Its goals are logged,
# not failed (test/controlplane/README.md says what is known).
.PHONY: controlplane-scale
controlplane-scale:
	CONTROLPLANE_SCALE100=1 go test -v -count=1 -timeout 60m -run '^TestScale100$$' ./test/controlplane

# Run the control-plane suite once per deliberate break of the function
# (test/controlplane/breaks_test.go): every run must fail where the break
# says it is caught, and leave no process behind. Not part of make test.
.PHONY: controlplane-breaks
controlplane-breaks:
	go test -v -count=1 -timeout 90m -run '^TestBreaksAreCaught$$' ./test/controlplane -args -breaks

# Refresh the end-to-end golden files after an intended change of output.
.PHONY: golden
golden:
	go test ./test/e2e -run TestRender -update

# Benchmarks in process: compare runs with benchstat.
.PHONY: bench
bench:
	go test -run '^$$' -bench . -skip '^BenchmarkGRPC$$' -benchmem -count 6 ./fn/ ./internal/decode/ ./internal/rollout/

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
