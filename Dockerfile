# The orchestrator's image: `jr2-actors serve` (docs/operations.md, "The image").
#   docker build -t jr2-actors:0.1.0 .
# Two stages from one base: the build stage installs the package into a virtual environment; the final
# stage copies only that environment, so no compiler, no pip and no pip cache reach the runtime image.
# The uid is numeric so the kubelet can check runAsNonRoot; the Deployment runs as the same uid.

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/jr2
WORKDIR /src
COPY pyproject.toml setup.cfg README.md ./
COPY jr2_actors ./jr2_actors
# jr2_actors/crds links here: the CRDs ship in the package (the fake cluster validates against them).
COPY manifests/crds ./manifests/crds
RUN /opt/jr2/bin/pip install --no-cache-dir '.[fast]' \
 && /opt/jr2/bin/pip uninstall --yes pip setuptools wheel

FROM ${PYTHON_IMAGE}
RUN python -m pip uninstall --yes pip setuptools wheel \
 && groupadd --gid 10001 jr2 \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin jr2 \
 && mkdir -p /var/lib/jr2 \
 && chown 10001:10001 /var/lib/jr2
COPY --from=build /opt/jr2 /opt/jr2
ENV PATH=/opt/jr2/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
WORKDIR /var/lib/jr2
USER 10001:10001
EXPOSE 8080 8081
STOPSIGNAL SIGTERM
ENTRYPOINT ["jr2-actors", "serve"]
