#!/usr/bin/env bash
# Install the PostgreSQL server that the records tests start on this host (Debian's package;
# see src/dispatch/testing/postgres.py). Debian/Ubuntu, as root. Starts no daemon. Idempotent.
set -euo pipefail
if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  echo "postgresql is already installed: $(ls -d /usr/lib/postgresql/*/ | xargs -n1 basename | tr '\n' ' ')"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "install-postgres.sh: not root, so PostgreSQL is not installed; the PostgreSQL records" \
       "tests will be skipped (install it with: sudo apt-get install postgresql)" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# the server binaries only: Debian's postinst would also create and start a cluster
apt-get install -y -q --no-install-recommends postgresql
if command -v pg_ctlcluster >/dev/null; then
  for cluster in $(pg_lsclusters -h 2>/dev/null | awk '{print $1"/"$2}'); do
    pg_ctlcluster "${cluster%/*}" "${cluster#*/}" stop || true
  done
fi
dpkg-query -W postgresql
