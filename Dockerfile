# vshortlink in one small image: build with the Rust toolchain, run on Debian slim as a
# non-root user with the data directory as a volume.
#
#   docker build -t vshortlink .
#   docker run -p 8080:8080 -v vsl-data:/data -e VSL_SERVER__BASE_URL=https://sl.example.com vshortlink
#
# With no [[auth.keys]] configured, the first start writes an admin key to /data/admin.key.

FROM rust:1-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock config.toml ./
COPY src src
COPY crates crates
COPY vendor vendor
COPY assets assets
COPY examples examples
COPY benches benches
RUN cargo build --release --locked --bin vshortlink

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --user-group --home-dir /data --no-create-home vsl \
 && mkdir -p /data && chown vsl:vsl /data
COPY --from=build /src/target/release/vshortlink /usr/local/bin/vshortlink
USER vsl
WORKDIR /data
ENV VSL_STORAGE__PATH=/data \
    VSL_SERVER__LISTEN=0.0.0.0:8080
VOLUME /data
EXPOSE 8080
# /healthz answers 503 while the store cannot write (disk full or failing), so the healthcheck
# reports it. sled keeps its first I/O error until the store is reopened: once the data
# directory accepts writes again, vshortlink drains, flushes and exits non-zero, and expects its
# supervisor to start it again. Run the container with a restart policy:
#   docker run --restart unless-stopped …   (or on-failure)
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["vshortlink", "healthcheck"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["vshortlink"]
CMD ["serve"]
