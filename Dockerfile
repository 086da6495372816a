# rondel: multi-stage build on Debian bookworm; the runtime stage holds only the binary and the
# shared libraries it links, and runs as a non-root user.
FROM debian:bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends g++ make cmake pkg-config libuv1-dev node-llhttp \
      libyaml-cpp-dev libxxhash-dev prometheus-cpp-dev doctest-dev libc-ares-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DRONDEL_BUILD_TESTS=OFF -DRONDEL_BUILD_TOOLS=OFF \
 && cmake --build /build --target rondel -j "$(nproc)" \
 && strip /build/src/server/rondel

FROM debian:bookworm-slim AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends libuv1 libyaml-cpp0.7 libxxhash0 \
      libprometheus-cpp-core1.0 libc-ares2 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --no-create-home --shell /usr/sbin/nologin rondel
COPY --from=build /build/src/server/rondel /usr/local/bin/rondel
COPY conf/rondel.yaml /etc/rondel/rondel.yaml
USER rondel
EXPOSE 8080 9901
ENTRYPOINT ["/usr/local/bin/rondel"]
CMD ["-f", "/etc/rondel/rondel.yaml"]
