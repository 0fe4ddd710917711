#!/usr/bin/env bash
# Trae agent (github.com/bytedance/trae-agent; not on PyPI) at the study's pinned commit, as a
# self-contained prefix outside this checkout (its code is never committed here):
#     scripts/install-trae-agent.sh PREFIX
# gives PREFIX/src (the git checkout), PREFIX/venv (the commit's uv.lock, exactly, with its
# `evaluation` extra: `trae-cli` imports `docker` and `pexpect` at startup, and only that extra
# has them), PREFIX/bin/trae-cli and PREFIX/bin/python. containers/trae-agent.def runs this
# script to build the cluster's image (PREFIX=/opt/trae-agent); on a workstation it installs
# the agent for local runs (`agent.trae.executable: PREFIX/bin/trae-cli`, demo tasks) and for
# the opt-in test tests/runner/test_trae_cli.py (FORGETTING_TRAE_CLI=PREFIX/bin/trae-cli).
#
# Environment:
#   TRAE_AGENT_REPO  where to clone from: a git URL or a local clone (default: GitHub)
#   TRAE_PYTHON      a CPython 3.12 to build the environment on; unset: uv's own CPython 3.12
#                    (python-build-standalone, downloaded from GitHub), kept in PREFIX/python
#   UV               the uv to use; unset: uv on PATH, else uv $UV_VERSION from PyPI in PREFIX/tools
set -euo pipefail

TRAE_COMMIT=e839e559ac61bdd0e057c375dd1dee391fee797d   # forgetting.agents.TRAE_COMMIT
UV_VERSION=0.13.8
PREFIX=${1:?usage: scripts/install-trae-agent.sh PREFIX}
REPO=${TRAE_AGENT_REPO:-https://github.com/bytedance/trae-agent.git}

mkdir -p "$PREFIX"
PREFIX=$(cd "$PREFIX" && pwd)
if [ -e "$PREFIX/src" ] || [ -e "$PREFIX/venv" ]; then
  echo "error: $PREFIX already holds an install (src/ or venv/); give an empty or new directory" >&2
  exit 2
fi

if [ -z "${UV:-}" ]; then
  if command -v uv >/dev/null; then
    UV=$(command -v uv)
  else
    "${TRAE_PYTHON:-python3}" -m venv "$PREFIX/tools"
    "$PREFIX/tools/bin/python" -m pip install --quiet --no-cache-dir "uv==$UV_VERSION"
    UV="$PREFIX/tools/bin/uv"
  fi
fi

git clone --quiet "$REPO" "$PREFIX/src"
git -C "$PREFIX/src" checkout --quiet --detach "$TRAE_COMMIT"
test "$(git -C "$PREFIX/src" rev-parse HEAD)" = "$TRAE_COMMIT"

export UV_PROJECT_ENVIRONMENT="$PREFIX/venv"
export UV_LINK_MODE=copy
UV_CACHE_DIR=$(mktemp -d)
export UV_CACHE_DIR
trap 'rm -rf "$UV_CACHE_DIR"' EXIT
if [ -n "${TRAE_PYTHON:-}" ]; then
  export UV_PYTHON_PREFERENCE=only-system
  PYTHON=$TRAE_PYTHON
else
  export UV_PYTHON_PREFERENCE=only-managed UV_PYTHON_INSTALL_DIR="$PREFIX/python"
  PYTHON=3.12
fi
# the commit's lock file, exactly; the package itself installed (not editable)
(cd "$PREFIX/src" && "$UV" sync --quiet --frozen --no-dev --no-editable --extra evaluation --python "$PYTHON")

mkdir -p "$PREFIX/bin"
# trae-cli's shebang names the environment's interpreter, so a link to it works; python must
# be started by its path inside venv/ (a link elsewhere to it is a bare CPython without the
# environment's packages: Python finds pyvenv.cfg next to the path it was started by)
ln -sf "$PREFIX/venv/bin/trae-cli" "$PREFIX/bin/trae-cli"
printf '#!/bin/sh\nexec "%s/venv/bin/python" "$@"\n' "$PREFIX" >"$PREFIX/bin/python"
chmod a+x "$PREFIX/bin/python"
chmod -R a+rX "$PREFIX"

# what the image's %test checks
"$PREFIX/bin/python" -c 'import sys; assert sys.version_info[:2] == (3, 12), sys.version'
"$PREFIX/bin/python" -c 'import docker, pexpect'  # what trae-cli imports at startup
"$PREFIX/bin/trae-cli" --help >/dev/null
echo "trae-cli at $PREFIX/bin/trae-cli (trae-agent $TRAE_COMMIT)"
