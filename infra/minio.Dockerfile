# MinIO built from the same pinned Go module as `python -m infra.minio build`, so docker compose
# runs the server the tests run against (conditional PUT and CompleteMultipartUpload honoured).
# MinIO publishes no registry package for this version; the minio/minio image tags lag behind.
FROM golang:1.26-alpine AS build
ARG MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
ENV CGO_ENABLED=0 GOFLAGS=-mod=mod GOBIN=/out
RUN go install github.com/minio/minio@${MINIO_VERSION}

FROM alpine:3.20
RUN apk add --no-cache ca-certificates
COPY --from=build /out/minio /usr/local/bin/minio
ENV MINIO_BROWSER=off MINIO_UPDATE=off
EXPOSE 9000 9001
VOLUME /data
ENTRYPOINT ["minio"]
CMD ["server", "/data", "--address", ":9000", "--console-address", ":9001"]
