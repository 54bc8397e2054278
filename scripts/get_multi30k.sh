#!/usr/bin/env bash
# Puts the Multi30k German-English corpus (task 1, raw text) under data/multi30k/:
# train.{de,en} (29000), val.{de,en} (1014), test_2016_flickr.{de,en} (1000).
# With --languages cs,de,en,fr, those languages' files instead (Czech, German, English, French:
# line i of each describes the same image, so any two are a parallel corpus).
# With --mono, also Multi30k's monolingual captions of the training images (task 2, as published):
# data/multi30k/task2/train.{1..5}.{de,en}.gz, five English and five German descriptions of each
# of the 29,000 training images, written independently (material for back-translation).
# Copies from ../shared/data/multi30k when that folder exists (development machines),
# otherwise downloads the raw files of the public multi30k/dataset repository.
# Then checks the line counts. Idempotent.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="$root/data/multi30k"
shared="$root/../shared/data/multi30k"
base_url="https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw"
declare -A expected=([train]=29000 [val]=1014 [test_2016_flickr]=1000)

languages="de,en"
mono=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --mono) mono=1 ;;
    --languages)
      languages=${2:-}
      shift
      ;;
    --languages=*) languages=${1#--languages=} ;;
    *)
      echo "get_multi30k: unknown option '$1' (--languages cs,de,en,fr picks the languages; --mono also gets the monolingual captions)" >&2
      exit 2
      ;;
  esac
  shift
done
IFS=, read -r -a language_list <<< "$languages"
for language in "${language_list[@]}"; do
  case $language in
    cs | de | en | fr) ;;
    *)
      echo "get_multi30k: --languages: '$language' is not one of Multi30k's cs, de, en, fr" >&2
      exit 2
      ;;
  esac
done

mkdir -p "$target"
for split in train val test_2016_flickr; do
  for language in "${language_list[@]}"; do
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
  for language in "${language_list[@]}"; do
    lines=$(wc -l < "$target/$split.$language")
    if [ "$lines" -ne "${expected[$split]}" ]; then
      echo "get_multi30k: $target/$split.$language has $lines lines, expected ${expected[$split]}; delete it and rerun" >&2
      exit 1
    fi
  done
done
echo "get_multi30k: data/multi30k ready in ${languages} (train 29000, val 1014, test_2016_flickr 1000 lines each)"

if [[ $mono == 1 ]]; then
  mkdir -p "$target/task2"
  for part in 1 2 3 4 5; do
    for language in de en; do
      file="train.$part.$language.gz"
      if [ -s "$target/task2/$file" ]; then continue; fi
      if [ -s "$shared/task2/$file" ]; then
        cp "$shared/task2/$file" "$target/task2/$file.part"
      else
        echo "get_multi30k: downloading task2/$file"
        curl -fsSL "${base_url%/task1/raw}/task2/raw/$file" -o "$target/task2/$file.part"
      fi
      lines=$(gunzip -c "$target/task2/$file.part" | wc -l)
      if [ "$lines" -ne 29000 ]; then
        echo "get_multi30k: task2/$file has $lines lines, expected 29000; rerun" >&2
        rm -f "$target/task2/$file.part"
        exit 1
      fi
      mv "$target/task2/$file.part" "$target/task2/$file"
    done
  done
  echo "get_multi30k: data/multi30k/task2 ready (5 x 29000 English and German captions)"
fi
