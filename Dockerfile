# Builds the three binaries into a small image. The same image runs the API
# (default), the worker (`worker`) and the operator CLI (`cltctl ...`).
FROM golang:1.26-bookworm AS build
# Honour go.mod's toolchain line (the image says GOTOOLCHAIN=local): the
# build fetches that Go release from the module proxy.
ENV GOTOOLCHAIN=auto
WORKDIR /src
COPY go.mod go.sum ./
RUN GOWORK=off go mod download
COPY . .
RUN CGO_ENABLED=0 GOWORK=off GOFLAGS=-buildvcs=false go build -trimpath -ldflags="-s -w" -o /out/ ./apps/api ./apps/worker ./apps/cltctl

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
USER nonroot:nonroot
EXPOSE 8080
ENV LISTEN_ADDR=:8080
ENTRYPOINT ["/usr/local/bin/api"]
