#!/usr/bin/env bash
# mitmproxy (PyPI) for the network tests: a venv of its own in the user cache, so its pinned
# dependencies never meet claudex's. Idempotent: a venv whose mitmdump reports the version is
# kept; a broken or partial one is made again. tests/proxy_servers.py looks in the same place.
#   PYTHON=python3.12 tests/tools/install_mitmproxy.sh
set -euo pipefail
VERSION=11.0.2
PYTHON=${PYTHON:-python3}
dir="${XDG_CACHE_HOME:-$HOME/.cache}/claudex-test-tools/mitmproxy-$VERSION"
if "$dir/bin/mitmdump" --version 2>/dev/null | grep -q "^Mitmproxy: $VERSION\$"; then
  exit 0
fi
echo "installing mitmproxy $VERSION into $dir" >&2
rm -rf "$dir"
mkdir -p "$(dirname "$dir")"
"$PYTHON" -m venv "$dir"
"$dir/bin/pip" install --quiet --disable-pip-version-check "mitmproxy==$VERSION"
"$dir/bin/mitmdump" --version | grep -q "^Mitmproxy: $VERSION\$"
