# One image for every process: the API (default entrypoint), the worker
# (`worker`) and the operator CLI (`cltctl ...`, including `cltctl index`,
# which reads a git checkout and so needs git; and `cltctl health`, the
# container health check, since the image has no curl).
FROM golang:1.26-bookworm AS build
# Honour go.mod's toolchain line (the image says GOTOOLCHAIN=local): the
# build fetches that Go release from the module proxy.
ENV GOTOOLCHAIN=auto
WORKDIR /src
COPY go.mod go.sum ./
RUN GOWORK=off go mod download
COPY . .
RUN CGO_ENABLED=0 GOWORK=off GOFLAGS=-buildvcs=false go build -trimpath -ldflags="-s -w" -o /out/ ./apps/api ./apps/worker ./apps/cltctl

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 65532 --user-group --no-create-home --home-dir /nonexistent codelotse \
 # Checkouts mounted for `cltctl index` belong to the host's user: let git
 # read them as this one (reading is all cltctl does).
 && git config --system --add safe.directory '*'
COPY --from=build /out/ /usr/local/bin/
USER 65532:65532
EXPOSE 8080
ENV LISTEN_ADDR=:8080
ENTRYPOINT ["/usr/local/bin/api"]
