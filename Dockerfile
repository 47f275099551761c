# syntax=docker/dockerfile:1
#
# scalechat: one static binary on distroless (no shell, no package manager,
# runs as uid 65532).
#
#   docker build -t scalechat .
#   docker run --rm -p 8080:8080 scalechat                  # one node
#   docker compose -f deploy/compose/docker-compose.yml up   # a cluster
#
# No HEALTHCHECK: the image has no shell or HTTP client to run one. Probe
# GET /readyz (200 ready or degraded, 503 draining) and GET /healthz from
# the orchestrator or the load balancer instead.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath \
      -ldflags "-s -w -X github.com/scalechat/scalechat/internal/version.version=${VERSION}" \
      -o /out/scalechat ./cmd/scalechat

# static-debian12 holds CA certificates, /etc/passwd with nonroot, and tzdata.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/scalechat /usr/local/bin/scalechat
USER nonroot:nonroot
# Listen on every interface of the container (the default is loopback).
ENV SCALECHAT_ADDR=0.0.0.0:8080
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/scalechat"]
CMD ["serve"]
