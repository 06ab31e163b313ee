#!/usr/bin/env bash
# Build a second, newer Slurm from SchedMD's source, beside Debian's 22.05, so that the Slurm
# tests can run against a second JSON format (docs/design/0012-slurm-second-version.md).
#
#   scripts/build-slurm-from-source.sh [TAG] [PREFIX]
#   DISPATCH_SLURM_PREFIX=PREFIX .venv/bin/pytest tests/slurm   # the Slurm tests against it
#
# TAG is a SchedMD release tag (default slurm-24-11-7-1), PREFIX the install folder (default
# /opt/slurm-24.11; it holds bin/, sbin/, lib/ and nothing else). The source comes from
# SLURM_GIT_DIR when set (a clone or bare mirror holding TAG), else from a shallow clone of
# https://github.com/SchedMD/slurm. Debian/Ubuntu, as root (build dependencies come from apt).
# Idempotent: a PREFIX that already holds TAG's build is left alone. Compiles under
# `nice -n 19`. Not called by `make test` or CI: they use Debian's Slurm only.
set -euo pipefail

tag=${1:-slurm-24-11-7-1}
prefix=${2:-/opt/slurm-24.11}
src=${SLURM_SRC_DIR:-/opt/src/$tag}
jobs=${JOBS:-2}

# slurm-24-11-7-1 -> 24.11.7
version=$(sed -E 's/^slurm-([0-9]+)-([0-9]+)-([0-9]+)-.*$/\1.\2.\3/' <<<"$tag")

# slurmd -V needs no slurm.conf (the client tools fail without one, even for --version)
if [ -x "$prefix/sbin/slurmd" ] && [ "$("$prefix/sbin/slurmd" -V)" = "slurm $version" ]; then
  echo "$prefix already holds slurm $version"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "build-slurm-from-source.sh: run as root (installs build dependencies with apt-get)" >&2
  exit 1
fi

# json-c: the --json output (serializer/json); yaml: --yaml; http-parser and jwt: slurmrestd;
# dbus: the cgroup/v2 plugin; munge: auth/munge; mariadb: slurmdbd's accounting_storage/mysql
# (sacct, when a test sets up accounting).
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends \
  build-essential pkg-config python3 git \
  libmunge-dev munge libjson-c-dev libyaml-dev libhttp-parser-dev libjwt-dev libdbus-1-dev \
  libmariadb-dev libmariadb-dev-compat

if [ ! -x "$src/configure" ]; then
  rm -rf "$src"
  mkdir -p "$src"
  if [ -n "${SLURM_GIT_DIR:-}" ]; then
    git -C "$SLURM_GIT_DIR" archive "$tag" | tar -x -C "$src"
  else
    git clone --quiet --depth 1 --branch "$tag" https://github.com/SchedMD/slurm "$src"
  fi
fi

cd "$src"
# sysconfdir only names the default slurm.conf; the tests always pass their own (SLURM_CONF).
# configure finds json-c, yaml, http-parser, jwt and dbus by itself; sview (GTK) and HDF5
# profiling are not wanted. multiple-slurmd: the test cluster runs two slurmd on one host (as
# Debian's build allows: `slurmd -N <node>`, one cgroup `slurm_<node>` each).
nice -n 19 ./configure --quiet --prefix="$prefix" --sysconfdir="$prefix/etc" \
  --enable-multiple-slurmd --disable-sview --without-hdf5
nice -n 19 make -j"$jobs" --quiet
nice -n 19 make --quiet install
# Without json-c the build succeeds but every `--json` fails: check what the tests need.
for plugin in serializer_json data_parser_v0_0_41 cgroup_v1 jobcomp_filetxt; do
  if [ ! -e "$prefix/lib/slurm/$plugin.so" ]; then
    echo "build-slurm-from-source.sh: $prefix/lib/slurm/$plugin.so was not built" >&2
    exit 1
  fi
done
"$prefix/sbin/slurmd" -V
