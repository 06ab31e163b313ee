# The dispatch image: the `dispatch` command with the Kubeflow adapter and the PostgreSQL
# records store, run as a non-root user. Used by deploy/ (the supervisors' Deployment).
# Not built on the machines this repository is developed on (they have no container runtime):
# see docs/how-to/deploy-in-cluster.md.
#
#   docker build -t registry.example.org/ml-platform/dispatch:0.1.0 .
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY src ./src
# The locked versions (constraints.txt) of the package and its kubeflow and postgres extras.
RUN pip install --constraint constraints.txt ".[kubeflow,postgres]" \
    && rm -rf /src

# uid/gid 10001: the Deployment's runAsUser/runAsGroup (deploy/base/deployment.yaml)
RUN groupadd --system --gid 10001 dispatch \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/dispatch \
       --no-create-home --shell /usr/sbin/nologin dispatch \
    && mkdir -p /var/lib/dispatch /etc/dispatch \
    && chown 10001:10001 /var/lib/dispatch

ENV DISPATCH_STATE_DIR=/var/lib/dispatch \
    DISPATCH_CONFIG=/etc/dispatch/config.yaml
WORKDIR /var/lib/dispatch
USER 10001:10001
ENTRYPOINT ["dispatch"]
CMD ["supervise"]
