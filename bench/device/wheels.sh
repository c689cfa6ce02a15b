#!/usr/bin/env bash
# Fetch what bench/finetune_gpu.py needs on the GPU machine, as wheels, into
# .whl/ (git-ignored through .git/info/exclude): the packages in carry.txt for
# CPython 3.12 on x86-64 (the image's Python), and judgegraph itself.
#
#   bash bench/device/wheels.sh            # for the H200 image (Python 3.12)
#   WHEEL_DIR=/tmp/w bash bench/device/wheels.sh 3.11   # to rehearse here
set -euo pipefail
cd "$(dirname "$0")/../.."
pyver="${1:-3.12}"
dest="${WHEEL_DIR:-.whl}"
exclude="$(git rev-parse --git-path info/exclude)"
mkdir -p "$(dirname "$exclude")" && touch "$exclude"
if [ "$dest" = ".whl" ] && ! grep -qxF '/.whl/' "$exclude"; then
    echo '/.whl/' >>"$exclude"
fi
rm -rf "$dest"
mkdir -p "$dest"
platforms=()
for n in 2_17 2_24 2_27 2_28 2_31 2_34 2_35 2_39; do platforms+=(--platform "manylinux_${n}_x86_64"); done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" --implementation cp \
    "${platforms[@]}" --platform manylinux2014_x86_64 -d "$dest" -r bench/device/carry.txt
python3 -m pip wheel -q --no-deps -w "$dest" .
du -sh "$dest"
