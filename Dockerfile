# Dockerfile — the tandem image for Kubernetes Jobs (docs/scheduling.md).
#
#   docker build -t registry.example.com/tandem:0.1 .
#   docker push registry.example.com/tandem:0.1
#   tandem manifest k8s my.yaml --set cluster.image=registry.example.com/tandem:0.1 > job.yaml
#
# Two stages on NVIDIA's CUDA images (Ubuntu 24.04): the build stage compiles tandem with
# the repository's Makefile; the runtime stage holds the binary and its shared libraries.
# The devel stage's nvcc compiles the GPU backend (gpu/, run.device=cuda) into the plugin
# tandem-cuda.so; the runtime stage's CUDA runtime, cuBLAS and NCCL run it. With run.device=cpu the image also runs on nodes
# without GPUs. The backend is developed against CUDA 13 (an NVIDIA driver >= 580 on the
# nodes); override with --build-arg CUDA_VERSION=... at your own risk.
#
# tandem is the ENTRYPOINT in exec form, so in a container it is PID 1 and receives the
# SIGTERM of a preemption itself (a shell in between would swallow it): it commits and
# exits 75. The rendered Jobs set `command` to the same binary with their own arguments.
#
# No container engine runs on the test machines: this file is checked for syntax and
# conventions by tests/k8s/check_dockerfile.py (tests/cli_k8s.sh), not built there.

ARG CUDA_VERSION=13.0.1
ARG UBUNTU_VERSION=24.04

FROM nvidia/cuda:${CUDA_VERSION}-devel-ubuntu${UBUNTU_VERSION} AS build
ENV DEBIAN_FRONTEND=noninteractive
# The build list of scripts/deps.sh; msgpack-c is libmsgpack-c-dev on newer releases.
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc make pkg-config libc6-dev \
      libopenblas-openmp-dev libyaml-dev libssl-dev libcurl4-openssl-dev zlib1g-dev libzstd-dev libjansson-dev libsnappy-dev \
 && (apt-get install -y --no-install-recommends libmsgpack-c-dev \
     || apt-get install -y --no-install-recommends libmsgpack-dev) \
 && rm -rf /var/lib/apt/lists/*
# msgpack-c >= 6 names its pkg-config file msgpack-c.pc; the Makefile asks for msgpack.
RUN if ! pkg-config --exists msgpack; then \
      ln -s "$(pkg-config --variable=pcfiledir msgpack-c)/msgpack-c.pc" \
            "$(pkg-config --variable=pcfiledir msgpack-c)/msgpack.pc"; \
    fi \
 && pkg-config --exists msgpack
WORKDIR /src
COPY Makefile ./
COPY util/ util/
COPY data/ data/
COPY model/ model/
COPY steps/ steps/
COPY storage/ storage/
COPY ledger/ ledger/
COPY comm/ comm/
COPY config/ config/
COPY report/ report/
COPY deploy/ deploy/
COPY runner/ runner/
COPY cli/ cli/
COPY gpu/ gpu/
COPY configs/presets/ configs/presets/
COPY scripts/embed_presets.sh scripts/
RUN make -j"$(nproc)" tandem && ./tandem --help >/dev/null && test -f tandem-cuda.so

FROM nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu${UBUNTU_VERSION}
ENV DEBIAN_FRONTEND=noninteractive
# The same libraries (their -dev packages pull in exactly the runtime libraries the
# binary was linked against, whatever the release calls them) and CA certificates for
# https S3 endpoints.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates libgomp1 \
      libopenblas-openmp-dev libyaml-dev libssl-dev libcurl4-openssl-dev zlib1g-dev libzstd-dev libjansson4 libsnappy1v5 \
 && (apt-get install -y --no-install-recommends libmsgpack-c-dev \
     || apt-get install -y --no-install-recommends libmsgpack-dev) \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/tandem /usr/local/bin/tandem
# the CUDA backend, loaded when a run asks for run.device=cuda (tandem looks beside
# itself and in ../lib/tandem/); the binary alone starts without the CUDA libraries
COPY --from=build /src/tandem-cuda.so /usr/local/lib/tandem/tandem-cuda.so
RUN /usr/local/bin/tandem --help >/dev/null
# A relative store (runs/<config name>) lands here; use an s3:// store in Kubernetes.
WORKDIR /work
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/tandem", "run"]
CMD ["/etc/tandem/config.yaml"]
