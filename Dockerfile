# syntax=docker/dockerfile:1

# The same image as test/tools/xpkg builds without Docker, for those who build
# with docker buildx instead:
#
#   docker buildx build --platform linux/amd64,linux/arm64 .
#
# The go build line must match the one test/tools/xpkg runs; test/xpkg checks
# that it does.

# The build stage runs on the builder's own platform and cross-compiles, which
# is much faster than building under emulation.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS
ARG TARGETARCH
WORKDIR /src

# Modules first, so a change to the source doesn't download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download

# Only what the binary is built from: no .git, bin/ or _output/ in the build,
# and nothing else that could make the binary differ from test/tools/xpkg's.
COPY cmd/ cmd/
COPY fn/ fn/
COPY internal/ internal/

ENV CGO_ENABLED=0
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -buildvcs=false -ldflags="-s -w -buildid=" -o /function ./cmd/function

# Distroless static has no shell or libc, which the static binary doesn't
# need. The user is its nonroot user, 65532, written as numbers: with
# runAsNonRoot and no runAsUser, the kubelet refuses an image whose user is a
# name, since it can't tell whether the name is root. It's also the
# xpkg-built image's user, which test/xpkg checks.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /function /function
EXPOSE 9443
USER 65532:65532
ENTRYPOINT ["/function"]
