# The butler-operator image: a release build on a distroless base, running as non-root.
#   docker build -t ghcr.io/butlerdotdev/butler-operator:v0.1.0 .
FROM rust:1.89-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p butler-operator --bin butler-operator

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/butler-operator /usr/local/bin/butler-operator
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/butler-operator"]
CMD ["run"]
