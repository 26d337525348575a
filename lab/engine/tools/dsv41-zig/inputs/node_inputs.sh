#!/usr/bin/env bash
# sparkfold lab engine (a TensorFold SIMULATOR): one node's run-time inputs for the lab's DeepSeek-V4.1 lane.
#
#   node_inputs.sh MODEL_DIR CACHE_DIR RANK [WORLD]
#
# The interface and outputs of TensorFold's tools/dsv41-zig/inputs/node_inputs.sh (bertholomus/TensorFold
# @59402086381a42c74d53053443224eec2790b4c5), written for the lab (it makes the lab's small files):
#   CACHE_DIR/rank-cache/rank<RANK>of<WORLD>-<hash>.bin   the node's rank cache (TF_DS_RANK_CACHE), by
#                                                         tf-dsv41-rank-cache (--parity on four nodes)
#   CACHE_DIR/dsv41_token_map.json                        the token map (TF_DS_TOKEN_MAP), by make_token_map.py
# WORLD is 4 unless given (RANK below it). CACHE_DIR/rank-cache must not hold another file of this rank.
#
# Environment:
#   RANK_CACHE_BIN  tf-dsv41-rank-cache; default: next to this script, else ../../bin (the installed
#                   <prefix>/libexec/dsv41-inputs -> <prefix>/bin), else ../../../zig-out/bin (the source tree)
#   PYTHON          the Python that runs make_token_map.py (default python3; the lab's needs only the stdlib)
set -euo pipefail

usage() {
  echo "usage: node_inputs.sh MODEL_DIR CACHE_DIR RANK [WORLD]" >&2
  exit 2
}
if [ $# -lt 3 ] || [ $# -gt 4 ]; then usage; fi
HERE=$(cd "$(dirname "$0")" && pwd)
[ -d "$1" ] || { echo "MODEL_DIR $1 is not a directory" >&2; exit 1; }
MODEL_DIR=$(cd "$1" && pwd)
CACHE_DIR=$2
RANK=$3
WORLD=${4:-4}

BIN=${RANK_CACHE_BIN:-}
if [ -z "$BIN" ]; then
  for candidate in "$HERE/tf-dsv41-rank-cache" "$HERE/../../bin/tf-dsv41-rank-cache" "$HERE/../../../zig-out/bin/tf-dsv41-rank-cache"; do
    if [ -x "$candidate" ]; then BIN=$candidate; break; fi
  done
fi
if [ -z "$BIN" ] || [ ! -x "$BIN" ]; then
  echo "no tf-dsv41-rank-cache next to $0, in ../../bin or in zig-out/bin: zig build install native, or set RANK_CACHE_BIN" >&2
  exit 1
fi
PYTHON=${PYTHON:-python3}

for f in config.json tokenizer.json; do
  [ -f "$MODEL_DIR/$f" ] || { echo "$MODEL_DIR has no $f: MODEL_DIR is the checkpoint" >&2; exit 1; }
done
mkdir -p "$CACHE_DIR/rank-cache"
CACHE_DIR=$(cd "$CACHE_DIR" && pwd)
PARITY=()
[ "$WORLD" = 4 ] && PARITY=(--parity)

echo "rank $RANK of $WORLD: the rank cache into $CACHE_DIR/rank-cache" >&2
"$BIN" "$MODEL_DIR" "$CACHE_DIR/rank-cache" "$RANK" "$WORLD" ${PARITY[@]+"${PARITY[@]}"}

echo "the token map into $CACHE_DIR/dsv41_token_map.json" >&2
"$PYTHON" "$HERE/make_token_map.py" "$MODEL_DIR" "$CACHE_DIR/dsv41_token_map.json"
