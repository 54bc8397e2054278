# Task 2 of Multi30k as monolingual text, and the ways to back-translate it, sourced by the scripts
# that use them.

# task2_captions LANGUAGE (en or de): prints the captions of task 2 in that language that are not
# lines of task 1's training, dev or test text, each once, in their first order.
task2_captions() {
  local m30k=data/multi30k language=$1
  gunzip -c $m30k/task2/train.{1,2,3,4,5}."$language".gz |
    awk 'FILENAME != "-" { seen[$0] = 1; next } NF > 0 && !seen[$0]++' \
      $m30k/train."$language" $m30k/val."$language" $m30k/test_2016_flickr."$language" -
}

# back_translation_options WAY (sample, beam, beam-noise or noise): prints the nmt synthesize
# options of that way of back-translating, one per line (readarray), or fails for another word.
# sample draws from the 10 likeliest subwords; beam-noise is beam 5, then each word deleted or
# replaced by <blank> with probability 0.1 and the words shuffled by up to 3 places (Edunov et al.
# 2018); noise is that noise alone.
back_translation_options() {
  local beam=(--beam-size 5 --length-penalty 0.6) noise=(--noise-delete 0.1 --noise-blank 0.1 --noise-shift 3)
  case $1 in
    sample) printf '%s\n' --sampling-topk 10 ;;
    beam) printf '%s\n' "${beam[@]}" ;;
    beam-noise) printf '%s\n' "${beam[@]}" "${noise[@]}" ;;
    noise) printf '%s\n' "${noise[@]}" ;;
    *) return 1 ;;
  esac
}
