# syntax=docker/dockerfile:1
# Multi-stage build of the reference node: a static binary on a minimal,
# non-root image. Probes: GET /healthz (alive) and GET /readyz (Redis
# reachable, not draining) on the HTTP port; /metrics (and the probes again)
# on the metrics port 7979; see deploy/helm for their use.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/server ./cmd/server

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/server /usr/local/bin/server
USER 65532:65532
EXPOSE 8080 7979
ENV MCP_ADDR=0.0.0.0:8080 MCP_METRICS_ADDR=0.0.0.0:7979
# No shell in the image: orchestrators probe /healthz and /readyz over HTTP
# (docker-compose.yml and the Helm chart do); the binary itself checks
# readiness with --healthcheck for plain Docker.
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 CMD ["/usr/local/bin/server", "--healthcheck", "http://127.0.0.1:8080/readyz"]
ENTRYPOINT ["/usr/local/bin/server"]
