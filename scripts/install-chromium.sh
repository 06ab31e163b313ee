#!/usr/bin/env bash
# Install the headless Chromium that the web UI's browser tests drive (Debian's `chromium`
# package, through Playwright pointed at it; see tests/ui/conftest.py). Debian/Ubuntu, as
# root. Starts nothing. Idempotent. Not root: says how, and the browser tests are skipped.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  echo "chromium is already installed: $(chromium --version 2>/dev/null || echo unknown version)"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "install-chromium.sh: not root, so Chromium is not installed; the web UI's browser" \
       "tests will be skipped (install it with: sudo apt-get install chromium)" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# the browser and a font with wide coverage for the screenshots; no desktop recommends
apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core
dpkg-query -W chromium
