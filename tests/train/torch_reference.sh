#!/bin/sh
# Reference test against transformers' GPT2LMHeadModel. Installs torch, transformers,
# safetensors and numpy from PyPI into a cached virtual environment
# (WEFT_TORCH_VENV, default ~/.cache/weft/torch-venv) on first use.
# Exits 77 (meson: skipped) when that install is impossible, unless
# WEFT_REQUIRE_TORCH_REFERENCE=1.
#
# usage: torch_reference.sh PATH/TO/reference_dump PATH/TO/torch_reference.py
set -eu
dump=$1
script=$2
venv=${WEFT_TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/weft/torch-venv}
if ! "$venv/bin/python" -c "import torch, transformers, safetensors, numpy" 2>/dev/null; then
  echo "torch_reference: installing torch transformers safetensors numpy into $venv"
  if ! { python3 -m venv "$venv" && "$venv/bin/pip" install -q torch transformers safetensors numpy; }; then
    [ "${WEFT_REQUIRE_TORCH_REFERENCE:-0}" = 1 ] && exit 1
    echo "torch_reference: SKIPPED: could not install torch/transformers from PyPI"
    exit 77
  fi
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$dump" "$tmp"
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} "$venv/bin/python" "$script" "$tmp"
