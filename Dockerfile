# syntax=docker/dockerfile:1
#
# ceph-recovery-budget: the exporter (and enforcer), built with the librados backend, and the
# `ceph` CLI for the cli backend.
#
# Build (from the repository root):
#   docker build -t ceph-recovery-budget:0.1.0 .
# Run (ceph.conf, the keyring and the config mounted read-only; see docs/deployment.md):
#   docker run -d --name ceph-recovery-budget -p 9939:9939 \
#     -v /etc/ceph/ceph.conf:/etc/ceph/ceph.conf:ro \
#     -v /etc/ceph/ceph.client.recovery-budget.keyring:/etc/ceph/keyring:ro \
#     -v /etc/ceph-recovery-budget/config.yml:/etc/ceph-recovery-budget/config.yml:ro \
#     ceph-recovery-budget:0.1.0
#
# Base images are pinned by version tag (Rust = the crate's rust-version, Debian 12 point
# release). To pin by digest as well, resolve the tags where you build and append @sha256:...:
#   docker buildx imagetools inspect rust:1.89-slim-bookworm
#   docker buildx imagetools inspect debian:12.12-slim

FROM rust:1.89-slim-bookworm AS builder
# librados-dev: the librados backend (`--features librados`) links librados.
# Not pinned to a package version (hadolint DL3008): Debian's mirrors keep only the newest
# version of a package in a release, so a pin such as librados-dev=16.2.15+ds-0+deb12u1 stops
# building at the next security update. What is installed is fixed by the base image's point
# release (bookworm) instead; rebuild to get security fixes.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends librados-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
# The runbook: built into the binary, served at /docs/runbook.md for the landing page's links.
COPY docs/runbook.md ./docs/runbook.md
# Cargo.toml declares a bench target: cargo wants its file even for a plain build.
COPY benches ./benches
RUN cargo build --release --locked --features librados --bin ceph-recovery-budget \
    && strip target/release/ceph-recovery-budget

FROM debian:12.12-slim
# librados2: the librados backend (`ceph.backend`, auto by default). ceph-common: the `ceph` CLI
# for `ceph.backend: cli` and for auto when librados cannot connect (Debian 12 ships Ceph 16.2).
# It also brings python3, which the HEALTHCHECK uses (the image has no curl or wget).
# Not pinned to a package version (hadolint DL3008), for the reason given in the builder stage:
# Debian 12.12 fixes the release, a version pin would break at the next security update.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends librados2 ceph-common \
    && rm -rf /var/lib/apt/lists/*
# Non-root: uid/gid 10001. The keyring must be readable by it (mode 0440, group 10001).
RUN groupadd --system --gid 10001 crb \
    && useradd --system --uid 10001 --gid 10001 --no-create-home \
       --home-dir /var/lib/ceph-recovery-budget --shell /usr/sbin/nologin crb \
    && mkdir -p /var/lib/ceph-recovery-budget /etc/ceph-recovery-budget \
    && chown 10001:10001 /var/lib/ceph-recovery-budget
COPY --from=builder /src/target/release/ceph-recovery-budget /usr/local/bin/ceph-recovery-budget
# Default config (observe mode, /etc/ceph/ceph.conf + /etc/ceph/keyring as
# client.recovery-budget); mount your own over it read-only.
COPY deploy/config.yml /etc/ceph-recovery-budget/config.yml
ENV CEPH_RECOVERY_BUDGET_CONFIG=/etc/ceph-recovery-budget/config.yml
# /var/lib/ceph-recovery-budget holds only a local cache of the enforcer's state: in enforce
# mode the state is kept in the cluster with the lease, so no volume is needed.
USER 10001:10001
EXPOSE 9939
# Plain HTTP, else HTTPS (with --web.config.file; the certificate is not checked here, and
# /-/healthy needs no password): plain HTTP on the TLS port is answered 400 at once.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python3", "-c", "import ssl, urllib.request as u\nfor url in ('http://127.0.0.1:9939/-/healthy', 'https://127.0.0.1:9939/-/healthy'):\n    try:\n        u.urlopen(url, timeout=4, context=ssl._create_unverified_context()); raise SystemExit(0)\n    except OSError: pass\nraise SystemExit(1)"]
ENTRYPOINT ["/usr/local/bin/ceph-recovery-budget"]
CMD ["serve"]
