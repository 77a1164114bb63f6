# syntax=docker/dockerfile:1
# The statepipe binary in a small image: built with a pinned Rust toolchain,
# run on distroless/cc (glibc and libgcc, no shell, no package manager) as a
# non-root user.
#
#   docker build -t statepipe:dev .
#   docker run --rm statepipe:dev pf --workers 2
#
# The runtime sizes itself from inside the container: `statepipe` reads its
# affinity mask (cpuset) and cgroup v1/v2 CPU quota and starts one worker
# per CPU they leave, so give the container whole CPUs (see deploy/README.md).

FROM rust:1.95.0-slim-bookworm AS build
WORKDIR /src
# g++: the zmq crate builds libzmq from its bundled C++ source (ZeroMQ is a peer
# of `statepipe bench pipeline --case remote`); the slim image has only gcc.
RUN apt-get update \
    && apt-get install -y --no-install-recommends g++=4:12.2.0-3 \
    && rm -rf /var/lib/apt/lists/*
COPY Cargo.toml Cargo.lock ./
COPY crates crates
COPY data data
# The caches keep the registry and the build between builds (BuildKit).
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p statepipe \
    && install -D -m 0755 target/release/statepipe /out/statepipe \
    && install -d -m 0755 /out/data

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/statepipe /usr/local/bin/statepipe
# distroless's `nonroot` user; journals and other state go to /data, which
# it owns (so a fresh Docker volume mounted there is writable too).
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
WORKDIR /data
EXPOSE 7878 8080
ENTRYPOINT ["/usr/local/bin/statepipe"]
CMD ["--help"]
