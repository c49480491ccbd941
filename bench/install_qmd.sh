#!/bin/sh
# Install the qmd peer (and bun, which runs it) for `python -m bench.run --peer qmd`.
# Outside the repository on purpose: nothing under node_modules may be committed.
# Usage: bench/install_qmd.sh [DIR]   (default: $QMD_DIR, else ~/.cache/kbase-bench/qmd)
set -eu
dir=${1:-${QMD_DIR:-$HOME/.cache/kbase-bench/qmd}}
mkdir -p "$dir" && cd "$dir"
[ -f package.json ] || echo '{"private": true}' > package.json
npm install --no-audit --no-fund @tobilu/qmd@2.8.3 bun
echo "qmd installed in $dir (run.py looks there, or pass --qmd-dir $dir)"
