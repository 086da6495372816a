# rondel: multi-stage build on Debian bookworm. The build stage installs the build dependencies
# with the project's own script (scripts/setup-deps.sh build), configures and builds with CMake
# (as `make build` does), and checks the image's configuration with `rondel -c`; the runtime
# stage holds only the binary, the shared libraries it links and that configuration, and runs as
# a non-root user.
#   docker build -t rondel .
#   docker run -p 8080:8080 -p 9901:9901 rondel            # conf/docker/rondel.yaml
#   docker run -v $PWD/my.yaml:/etc/rondel/rondel.yaml:ro -p 8080:8080 rondel
FROM debian:bookworm AS build
ENV DEBIAN_FRONTEND=noninteractive
WORKDIR /src
COPY scripts/setup-deps.sh scripts/setup-deps.sh
RUN scripts/setup-deps.sh build && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DRONDEL_BUILD_TESTS=OFF -DRONDEL_BUILD_TOOLS=OFF \
 && cmake --build /build --target rondel -j "$(nproc)" \
 && strip /build/src/server/rondel \
 && /build/src/server/rondel -V \
 && /build/src/server/rondel -c -f conf/docker/rondel.yaml

FROM debian:bookworm-slim AS runtime
# curl: the HEALTHCHECK's client. The libraries are the runtime packages of the -dev packages
# setup-deps.sh installs for the build.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libuv1 libyaml-cpp0.7 libxxhash0 \
      libprometheus-cpp-core1.0 libc-ares2 libsystemd0 libboost-json1.81.0 curl ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin rondel
COPY --from=build /build/src/server/rondel /usr/local/bin/rondel
COPY conf/docker/rondel.yaml /etc/rondel/rondel.yaml
# The runtime stage links what the build stage linked: fail the build if a library is missing.
RUN ldd /usr/local/bin/rondel | (! grep -q "not found") \
 && /usr/local/bin/rondel -c -f /etc/rondel/rondel.yaml
USER 10001:10001
EXPOSE 8080 9901
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD curl -fsS http://127.0.0.1:9901/healthz || exit 1
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/rondel"]
CMD ["-f", "/etc/rondel/rondel.yaml"]
