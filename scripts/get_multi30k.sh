#!/usr/bin/env bash
# Puts the Multi30k German-English corpus (task 1, raw text) under data/multi30k/:
# train.{de,en} (29000), val.{de,en} (1014), test_2016_flickr.{de,en} (1000).
# Copies from ../shared/data/multi30k when that folder exists (development machines),
# otherwise downloads the raw files of the public multi30k/dataset repository.
# Then checks the line counts. Idempotent.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="$root/data/multi30k"
shared="$root/../shared/data/multi30k"
base_url="https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw"
declare -A expected=([train]=29000 [val]=1014 [test_2016_flickr]=1000)

mkdir -p "$target"
for split in train val test_2016_flickr; do
  for language in de en; do
    file="$split.$language"
    if [ -s "$target/$file" ]; then continue; fi
    if [ -s "$shared/$file" ]; then
      cp "$shared/$file" "$target/$file.part"
    else
      echo "get_multi30k: downloading $file"
      curl -fsSL "$base_url/$file.gz" -o "$target/$file.gz.part"
      gunzip -c "$target/$file.gz.part" > "$target/$file.part"
      rm -f "$target/$file.gz.part"
    fi
    mv "$target/$file.part" "$target/$file"
  done
done

for split in "${!expected[@]}"; do
  for language in de en; do
    lines=$(wc -l < "$target/$split.$language")
    if [ "$lines" -ne "${expected[$split]}" ]; then
      echo "get_multi30k: $target/$split.$language has $lines lines, expected ${expected[$split]}; delete it and rerun" >&2
      exit 1
    fi
  done
done
echo "get_multi30k: data/multi30k ready (train 29000, val 1014, test_2016_flickr 1000 pairs)"
