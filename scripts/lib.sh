# Shared by scripts/demo and scripts/test: a Python environment with this package, made once.
#   FORGETTING_VENV   where the virtual environment lives (default: .venv in the checkout)
#   PYTHON            the interpreter to build it from (default: python3; needs 3.11 or newer)

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${FORGETTING_VENV:-$ROOT/.venv}"
export PATH="$VENV/bin:$PATH"
# keep mini-swe-agent and litellm offline and out of ~/.config
export LITELLM_LOCAL_MODEL_COST_MAP=True MSWEA_SILENT_STARTUP=1 MSWEA_CONFIGURED=true

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

ensure_python_env() {
  local py="${PYTHON:-python3}"
  if ! command -v "$py" >/dev/null; then
    echo "error: $py not found; install Python 3.11 or newer (Debian: apt-get install python3 python3-venv)" >&2
    exit 2
  fi
  if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "error: $("$py" --version) is too old; the pipeline needs Python 3.11 or newer (set PYTHON=...)" >&2
    exit 2
  fi
  if [ ! -x "$VENV/bin/python" ]; then
    say "creating the virtual environment $VENV"
    "$py" -m venv "$VENV" || { echo "error: python3 -m venv failed; on Debian: apt-get install python3-venv" >&2; exit 2; }
  fi
  # reinstall only when a dependency list changed (idempotent and fast on a second call)
  local stamp="$VENV/.forgetting-$(cat "$ROOT/pyproject.toml" "$ROOT/testkit/pyproject.toml" | sha256sum | cut -c1-16)"
  if [ ! -f "$stamp" ]; then
    say "installing the package, its testkit and their dependencies into $VENV (about a minute)"
    "$VENV/bin/python" -m pip install -q --upgrade pip
    "$VENV/bin/python" -m pip install -q -e "$ROOT[test]" -e "$ROOT/testkit"
    rm -f "$VENV"/.forgetting-* && touch "$stamp"
  fi
}

ensure_git() {
  if ! command -v git >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      say "installing git"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends git
    else
      echo "error: git is needed (the demo tasks are git repositories); install it and rerun" >&2
      exit 2
    fi
  fi
}

# Debian packages for the checks of what a user sees, installed by scripts/test as root:
#   chromium   renders the Snakemake HTML report (scripts/check-report.sh)
#   pdflatex   compiles the LaTeX tables (booktabs, longtable, geometry, T1 fonts)
# Without root or apt-get the tests that need a missing one skip with the reason given in
# FORGETTING_CHROMIUM_SKIP / FORGETTING_TEX_SKIP.
CHROMIUM_PACKAGES=(chromium)
TEX_PACKAGES=(texlive-latex-base texlive-latex-recommended)

can_apt_install() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; }

have_chromium() { command -v chromium >/dev/null || command -v chromium-browser >/dev/null; }

ensure_report_tools() {
  local need=() missing=()
  if ! have_chromium; then need+=("${CHROMIUM_PACKAGES[@]}"); missing+=(chromium); fi
  if ! command -v pdflatex >/dev/null; then need+=("${TEX_PACKAGES[@]}"); missing+=(pdflatex); fi
  if [ ${#need[@]} -eq 0 ]; then
    say "report checks: chromium and pdflatex are installed"
    return 0
  fi
  if can_apt_install; then
    say "report checks: installing ${need[*]} (Debian, --no-install-recommends) for ${missing[*]}"
    local start=$SECONDS
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; }; then
      echo "error: apt-get install ${need[*]} failed; the report's browser check and the LaTeX compile check need them" >&2
      exit 1
    fi
    if ! have_chromium || ! command -v pdflatex >/dev/null; then
      echo "error: apt-get installed ${need[*]} but chromium or pdflatex is still not on PATH" >&2
      exit 1
    fi
    say "report checks: installed in $((SECONDS - start)) s"
    return 0
  fi
  local why="not root (or no apt-get): ./scripts/test installs it as root with apt-get"
  if ! have_chromium; then
    export FORGETTING_CHROMIUM_SKIP="chromium not installed ($why: ${CHROMIUM_PACKAGES[*]}): the HTML report's rendering is not checked"
    say "report checks: skipped ($FORGETTING_CHROMIUM_SKIP)"
  fi
  if ! command -v pdflatex >/dev/null; then
    export FORGETTING_TEX_SKIP="pdflatex not installed ($why: ${TEX_PACKAGES[*]}): the LaTeX tables are not compiled"
    say "report checks: skipped ($FORGETTING_TEX_SKIP)"
  fi
}
