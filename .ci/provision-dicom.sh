#!/usr/bin/env bash
# DICOM tools of the hospital-deployment tests: Debian's dicom3tools (dciodvfy, the DICOM object validator the
# tests run on every DICOM object written) and orthanc (the PACS of the gateway's end-to-end test; the tests start
# their own instance on loopback, the packaged service is not used). Idempotent; as root it installs what is
# missing, as another user it says what to run.
set -euo pipefail
if command -v dciodvfy >/dev/null && command -v Orthanc >/dev/null; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "error: dciodvfy (dicom3tools) or Orthanc missing for the DICOM tests; run: sudo make dicom-tools" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends dicom3tools orthanc >/dev/null
# the package's own service is not wanted (no systemd in CI; the tests run Orthanc on loopback themselves)
if command -v service >/dev/null && [ -x /etc/init.d/orthanc ]; then service orthanc stop >/dev/null 2>&1 || true; fi
command -v dciodvfy Orthanc
