#!/usr/bin/env bash
# A real full disk, on a small tmpfs (needs root to mount it; otherwise says "skipped" and exits
# 77): a run is resumed on a disk with no room, then with room for its logs but not for a
# checkpoint, and a translation is written to the full disk. Each must fail with a message naming
# the file and "No space left on device", and leave every file written before as it was, with no
# temporary file behind. The suite simulates the same with a file-size limit (tests/test_faults.cpp).
# Usage: scripts/faults/disk_full.sh [NMT_BINARY]   (default build/nmt)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
nmt="${1:-$root/build/nmt}"
[ -x "$nmt" ] || { echo "disk_full: $nmt not found; run scripts/build.sh first" >&2; exit 1; }
if [ "$(id -u)" != 0 ]; then
  echo "disk_full: skipped (mounting a tmpfs needs root)"
  exit 77
fi
work="$(mktemp -d)"
disk="$work/disk"
mkdir "$disk"
cleanup() {
  umount "$disk" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
if ! mount -t tmpfs -o size=6m tmpfs "$disk" 2>/dev/null; then
  echo "disk_full: skipped (this machine refuses to mount a tmpfs)"
  exit 77
fi

toy="$root/data/toy"
model="$disk/model"
train=(train --train-source "$toy/train.src" --train-target "$toy/train.tgt" --dev-source "$toy/dev.src"
  --dev-target "$toy/dev.tgt" --model-dir "$model" --vocab-size 200 --byte-fallback false --embedding-size 16 --encoder-hidden-size 8
  --decoder-hidden-size 16 --attention-size 8 --validate-every 2 --batch-tokens 400 --threads 1)
fail() {
  echo "disk_full: FAILED: $*" >&2
  exit 1
}

"$nmt" "${train[@]}" --max-steps 2 > "$work/first.log" 2>&1 || fail "the first run did not finish: $(tail -1 "$work/first.log")"
mkdir "$work/before"
cp -a "$model/." "$work/before/"

# Fills the disk but for $1 KB.
fill_leaving() {
  rm -f "$disk/filler"
  dd if=/dev/zero of="$disk/filler" bs=4k 2>/dev/null || true
  [ "$1" -gt 0 ] && truncate -s "-$(($1 * 1024))" "$disk/filler"
  return 0
}

# A resumed run, and what it must leave: exit 1, the message, the earlier files unchanged.
check_resume() {
  local what="$1" file="$2"
  local status=0
  "$nmt" "${train[@]}" --max-steps 4 --resume > "$work/out" 2>&1 || status=$?
  [ "$status" = 1 ] || fail "$what: exit status $status, not 1"
  grep -q "$file: write failed (No space left on device)" "$work/out" ||
    fail "$what: no message naming $file: $(tail -1 "$work/out")"
  grep -q "terminate called" "$work/out" && fail "$what: the process aborted"
  for name in last.ckpt best.ckpt vocab.joint.model train.corpus; do
    cmp -s "$model/$name" "$work/before/$name" || fail "$what: $name changed"
  done
  if ls "$model" | grep -q '\.tmp\.'; then fail "$what: a temporary file was left: $(ls "$model")"; fi
  echo "disk_full: $what: exit 1, '$(grep -o "$file: write failed ([^)]*)" "$work/out" | head -1)', files intact"
}

fill_leaving 0
check_resume "no room at all" "$model/config.toml"
fill_leaving 200  # the configuration and the logs fit, a checkpoint (about 700 KB) does not
check_resume "no room for a checkpoint" "$model/last.ckpt"

fill_leaving 0
status=0
"$nmt" translate --model "$model" --input "$toy/dev.src" --output "$disk/dev.hyp" --threads 1 > "$work/out" 2>&1 ||
  status=$?
[ "$status" = 1 ] && grep -q "$disk/dev.hyp: write failed (No space left on device)" "$work/out" ||
  fail "translate onto a full disk: status $status, $(tail -1 "$work/out")"
[ -e "$disk/dev.hyp" ] && fail "translate left a partial $disk/dev.hyp"
ls "$disk" | grep -q '\.tmp\.' && fail "translate left a temporary file"
echo "disk_full: translate onto a full disk: exit 1, message, no partial file"
echo "disk_full: all cases passed"
