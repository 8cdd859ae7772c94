# The images of this repository: release builds on a distroless base, running as non-root.
#   docker build --target butler-operator   -t ghcr.io/butlerdotdev/butler-operator:v0.1.0 .
#   docker build --target butler-controller -t ghcr.io/butlerdotdev/butler-controller:v0.1.0 .
# (`make image VERSION=v0.1.0` builds both.)
FROM rust:1.89-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p butler-operator --bin butler-operator -p butler-controller --bin butler-controller

# The core provider's controller: the core components run /butler-controller run.
FROM gcr.io/distroless/cc-debian12:nonroot AS butler-controller
COPY --from=build /src/target/release/butler-controller /butler-controller
USER 65532:65532
ENTRYPOINT ["/butler-controller"]
CMD ["run"]

# The provider operator: what the install manifest runs (the default target).
FROM gcr.io/distroless/cc-debian12:nonroot AS butler-operator
COPY --from=build /src/target/release/butler-operator /usr/local/bin/butler-operator
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/butler-operator"]
CMD ["run"]
