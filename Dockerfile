# mnemos service image: release build, then a slim runtime with only the binary and config.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin mnemos

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --home /var/lib/mnemos mnemos \
    && mkdir -p /var/lib/mnemos && chown mnemos /var/lib/mnemos
COPY --from=build /src/target/release/mnemos /usr/local/bin/mnemos
COPY config /etc/mnemos/config
USER mnemos
WORKDIR /var/lib/mnemos
ENV MNEMOS_ENV=production
EXPOSE 8077
HEALTHCHECK --interval=10s --timeout=3s --retries=5 CMD curl -fsS http://127.0.0.1:8077/health || exit 1
ENTRYPOINT ["mnemos", "--config-dir", "/etc/mnemos/config"]
CMD ["serve"]
