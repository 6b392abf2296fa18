#!/usr/bin/env bash
# Installs podman and runc from Debian for `make test-images`, unless both are already there.
# Idempotent. Needs root (or sudo) and the Debian package index.
set -euo pipefail

if command -v podman >/dev/null && command -v runc >/dev/null; then
  exit 0
fi
SUDO=()
if [[ "$(id -u)" != 0 ]]; then
  SUDO=(sudo)
fi
"${SUDO[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq podman runc
podman --version
runc --version | head -1
