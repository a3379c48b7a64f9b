# mnemos service image. Build: `docker build -t mnemos .`; run on the embedded default:
#   docker run -d --name mnemos -p 127.0.0.1:8077:8077 -v mnemos-data:/var/lib/mnemos mnemos
#   docker exec mnemos mnemos keys create --tenant default --agent '*' --scope admin,read,write
# docker-compose.yml runs it on PostgreSQL, Redis and FalkorDB instead (MNEMOS_ENV=production).

# Pinned: the toolchain this repository is tested with, and a Debian point release.
FROM rust:1.95.0-bookworm AS build
WORKDIR /src
# 1. Dependencies only, cached until Cargo.toml or Cargo.lock change: build the
#    workspace's dependency graph against empty crates.
COPY Cargo.toml Cargo.lock ./
COPY actors/Cargo.toml actors/Cargo.toml
COPY bert/Cargo.toml bert/Cargo.toml
RUN mkdir -p src actors/src bert/src examples \
    && echo 'fn main() {}' > src/main.rs && touch src/lib.rs actors/src/lib.rs bert/src/lib.rs \
    && echo 'fn main() {}' > examples/library.rs \
    && cargo build --release --locked --bin mnemos \
    && rm -rf src actors/src bert/src examples target/release/.fingerprint/mnemos-*
# 2. The sources (the console's files are embedded by build.rs).
COPY . .
RUN touch src/main.rs src/lib.rs actors/src/lib.rs bert/src/lib.rs \
    && cargo build --release --locked --bin mnemos

FROM debian:12.12-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --home /var/lib/mnemos mnemos \
    && mkdir -p /var/lib/mnemos && chown mnemos /var/lib/mnemos
COPY --from=build /src/target/release/mnemos /usr/local/bin/mnemos
COPY config /etc/mnemos/config
USER mnemos
WORKDIR /var/lib/mnemos
VOLUME /var/lib/mnemos
ENV MNEMOS_ENV=container
EXPOSE 8077
HEALTHCHECK --interval=10s --timeout=3s --retries=5 CMD curl -fsS http://127.0.0.1:8077/health || exit 1
ENTRYPOINT ["mnemos", "--config-dir", "/etc/mnemos/config"]
CMD ["serve"]
