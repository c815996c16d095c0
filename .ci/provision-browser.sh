#!/usr/bin/env bash
# A headless browser for the leaderboard page's rendering test (tests/test_leaderboard_page.py): Debian's
# chromium-headless-shell (the same engine as the chromium package, without the desktop parts). Idempotent; as root
# it installs what is missing, as another user it says what to run.
set -euo pipefail
if command -v chromium-headless-shell >/dev/null || command -v chromium >/dev/null; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "error: no headless browser for the leaderboard page test; run: sudo make browser" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium-headless-shell fonts-dejavu-core >/dev/null
command -v chromium-headless-shell
