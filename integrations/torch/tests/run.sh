#!/bin/sh
# The torch backend's test suite, as scripts/test runs it: installs weft_torch
# (built against this build's libweft) into the test venv when its sources or
# libweft changed, then runs pytest, writing JUnit XML for scripts/test's count.
# The venv is the one the GPT-2 reference test installs (WEFT_TORCH_VENV);
# without torch there the suite is skipped (77), unless WEFT_REQUIRE_TORCH_REFERENCE=1.
#
# usage: run.sh BUILD_DIR JUNIT_XML [pytest args]
set -eu
build=$(cd "$1" && pwd)
xml=$2
shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
venv=${WEFT_TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/weft/torch-venv}
if ! "$venv/bin/python" -c "import torch, transformers" 2>/dev/null; then
  [ "${WEFT_REQUIRE_TORCH_REFERENCE:-0}" = 1 ] && { echo "torch-backend: no torch in $venv"; exit 1; }
  echo "torch-backend: SKIPPED: no torch/transformers in $venv"
  exit 77
fi
# pytest, and what a build without isolation needs from the environment
"$venv/bin/python" -c "import pytest, wheel, setuptools" 2>/dev/null || "$venv/bin/pip" install -q pytest wheel setuptools
stamp=$(cat "$here"/setup.py "$here"/weft_torch/*.py "$here"/weft_torch/csrc/* "$build"/libweft.so.0 \
        "$here"/../../include/weft/weft.h | sha256sum | cut -c1-16)
installed=$("$venv/bin/python" -c "import weft_torch, os; print(open(os.path.join(os.path.dirname(weft_torch.__file__), 'STAMP')).read())" 2>/dev/null || true)
if [ "$stamp" != "$installed" ]; then
  echo "torch-backend: building weft_torch into $venv"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  cp -r "$here"/setup.py "$here"/weft_torch "$tmp"/
  if ! WEFT_LIB_DIR=$build WEFT_INCLUDE_DIR=$here/../../include \
      "$venv/bin/pip" install -q --no-build-isolation "$tmp" > "$tmp/pip.log" 2>&1; then
    cat "$tmp/pip.log"
    echo "torch-backend: building weft_torch failed"
    exit 1
  fi
  dir=$("$venv/bin/python" -c "import weft_torch, os; print(os.path.dirname(weft_torch.__file__))")
  echo "$stamp" > "$dir/STAMP"
fi
cd "$here/tests"
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider --junitxml="$xml" "$@"
