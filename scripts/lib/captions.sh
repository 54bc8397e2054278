# Task 2 of Multi30k as monolingual text, sourced by the scripts that use it.

# task2_captions LANGUAGE (en or de): prints the captions of task 2 in that language that are not
# lines of task 1's training, dev or test text, each once, in their first order.
task2_captions() {
  local m30k=data/multi30k language=$1
  gunzip -c $m30k/task2/train.{1,2,3,4,5}."$language".gz |
    awk 'FILENAME != "-" { seen[$0] = 1; next } NF > 0 && !seen[$0]++' \
      $m30k/train."$language" $m30k/val."$language" $m30k/test_2016_flickr."$language" -
}
