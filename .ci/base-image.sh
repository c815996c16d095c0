# Sourced by provision-docker.sh and require-docker.sh: is $BASE_IMAGE usable as python:3.11-slim?
# The offline stand-in (provision-docker.sh) is Debian 12's Python 3.11 from debootstrap, shaped like the real image
# in what Dockerfiles rely on: the `python`, `pip`, `pip3` commands (pip installs as on the real image: no PEP 668
# marker) and its configuration (PATH, LANG, PYTHON_VERSION, CMD ["python3"]). STANDIN_VERSION names this recipe:
# a stand-in of another recipe, or of none (the first ones had no configuration at all), is built again; a real
# python:3.11-slim (pulled or loaded: no such label, a configuration) is kept.
BASE_IMAGE="${BASE_IMAGE:-python:3.11-slim}"
STANDIN_VERSION=2
STANDIN_LABEL=org.medchallenge.base-standin

base_image_current() {
  local config
  config="$(docker image inspect --format "{{index .Config.Labels \"$STANDIN_LABEL\"}}|{{json .Config.Env}}" \
    "$BASE_IMAGE" 2>/dev/null)" || return 1
  case "$config" in
    "$STANDIN_VERSION|"*) return 0 ;;
    "|null" | "|[]") return 1 ;;
    "|"*) return 0 ;;
    *) return 1 ;;
  esac
}
