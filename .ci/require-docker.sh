#!/usr/bin/env bash
# Before anything needs Docker (make images, demo, test, bench, save): check that a Docker engine, Compose v2 and
# the base image are usable. Where they are not, provision them as CI does when this user may (root on a Debian
# machine with apt-get), else stop with one line saying what to run.
set -uo pipefail
# shellcheck source=base-image.sh
source "$(dirname "$0")/base-image.sh"

problem=""
if ! command -v docker >/dev/null 2>&1; then
  problem="there is no docker command"
elif ! docker info >/dev/null 2>&1; then
  problem="no Docker engine answers ('docker info' failed)"
elif ! docker compose version >/dev/null 2>&1; then
  problem="Docker Compose v2 is missing ('docker compose' is not a docker command here)"
elif ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  problem="the base image $BASE_IMAGE is missing"
elif ! base_image_current; then
  problem="the base image $BASE_IMAGE is an outdated offline stand-in (no python, pip or image configuration)"
fi
[ -z "$problem" ] && exit 0

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "[docker] $problem: provisioning Docker as CI does (.ci/provision-docker.sh)"
  exec bash "${PROVISION_DOCKER_SCRIPT:-$(dirname "$0")/provision-docker.sh}"
fi
echo "error: $problem; run 'sudo make docker' once (Debian 12: Docker engine, Compose v2 and the offline base image), or install Docker with Compose v2 and $BASE_IMAGE yourself, then run this command again" >&2
exit 1
