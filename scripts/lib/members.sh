# The members and the choice of scripts/multi30k_best.sh and scripts/multi30k_mono.sh, sourced by
# both: two members trained side by side, one thread each (additive and cosine attention); the
# choice of a system on val; one translation of test_2016_flickr by it.
# The sourcing script sets `out` (its output directory) and `name` (the prefix of its messages).
members=(additive cosine)
search=(--beam-size 5 --length-penalty 0.6)
dev=(--src data/multi30k/val.de --ref data/multi30k/val.en)
test=(--src data/multi30k/test_2016_flickr.de --ref data/multi30k/test_2016_flickr.en)

# train_members MINUTES TRAIN_OPTIONS...: trains $out/additive and $out/cosine for MINUTES each,
# logs in $out/MEMBER.out; Ctrl-C, or one member failing, stops the other too.
train_members() {
  local minutes=$1 m
  shift
  member_pids=()
  trap 'kill "${member_pids[@]}" 2>/dev/null || true' EXIT
  for m in "${members[@]}"; do
    build/nmt train "$@" --attention "$m" --model-dir "$out/$m" --overwrite --threads 1 \
      --max-minutes "$minutes" --early-stopping-patience 0 --keep-checkpoints 5 > "$out/$m.out" 2>&1 &
    member_pids+=($!)
  done
  for _ in "${member_pids[@]}"; do
    if ! wait -n; then   # the members are this shell's only background jobs
      echo "$name: a member failed, see $(printf "$out/%s.out " "${members[@]}")" >&2
      exit 1
    fi
  done
  trap - EXIT
}

dev_bleu() {  # nmt evaluate options (models and checkpoints): prints dev BLEU
  local result
  result=$(build/nmt evaluate "$@" "${dev[@]}" "${search[@]}" --json --quiet) || return 1
  python3 -c 'import json, sys; print("%.2f" % json.loads(sys.argv[1])["bleu"])' "$result"
}

higher() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }'; }

# choose_on_val: for each member its best checkpoint and the average of its last 3 kept ones
# (written as avg3.ckpt) scored on val, the better kept; then the ensemble of the two when it
# beats the better member. Writes every score to $out/val.tsv and sets system=(evaluate options).
choose_on_val() {
  local chosen=() picks=() single=() single_bleu=-1 m pick bleu checkpoint score ensemble_bleu
  printf "system\tcheckpoints\tdev BLEU (val, %s)\n" "${search[*]}" > "$out/val.tsv"
  for m in "${members[@]}"; do
    build/nmt average --model "$out/$m" --last 3 --output "$out/$m/avg3.ckpt" > /dev/null
    pick="" bleu=-1
    for checkpoint in best.ckpt avg3.ckpt; do
      score=$(dev_bleu --model "$out/$m" --checkpoint "$out/$m/$checkpoint")
      printf "%s\t%s\t%s\n" "$m" "$checkpoint" "$score" >> "$out/val.tsv"
      if higher "$score" "$bleu"; then pick=$checkpoint bleu=$score; fi
    done
    chosen+=(--model "$out/$m" --checkpoint "$out/$m/$pick")
    picks+=("$m/$pick")
    if higher "$bleu" "$single_bleu"; then single_bleu=$bleu single=(--model "$out/$m" --checkpoint "$out/$m/$pick"); fi
  done
  ensemble_bleu=$(dev_bleu "${chosen[@]}")
  printf "ensemble\t%s\t%s\n" "${picks[*]}" "$ensemble_bleu" >> "$out/val.tsv"
  if higher "$ensemble_bleu" "$single_bleu"; then system=("${chosen[@]}"); else system=("${single[@]}"); fi
}

# test_once: the chosen system translates test_2016_flickr once, into $out/test.hyp, its BLEU
# and chrF2 into $out/test.txt, and prints them.
test_once() {
  echo "$name: test_2016_flickr, ${search[*]}, once:"
  build/nmt evaluate "${system[@]}" "${test[@]}" "${search[@]}" --output "$out/test.hyp" --quiet > "$out/test.txt.tmp"
  mv "$out/test.txt.tmp" "$out/test.txt"
  cat "$out/test.txt"
}
