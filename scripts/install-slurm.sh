#!/usr/bin/env bash
# Install a Slurm that the tests can start on this host (two nodes on one machine; see
# tests/slurm/realslurm.py). Debian/Ubuntu, as root. Starts no daemon. Idempotent.
set -euo pipefail
if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null; then
  echo "slurm and munge are already installed: $(dpkg-query -W -f '${Version}' slurm-wlm 2>/dev/null || echo unknown)"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "install-slurm.sh: not root, so Slurm is not installed; the Slurm tests will be skipped" \
       "(install it with: sudo apt-get install slurm-wlm munge)" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q slurm-wlm munge
dpkg-query -W slurm-wlm munge
