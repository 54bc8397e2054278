// Text in, text out: tokenizes, batches sentences by length, searches, and restores input order.
#pragma once

#include <torch/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/translate_options.h"
#include "search/search.h"
#include "search/shortlist.h"
#include "text/protect.h"
#include "text/sentences.h"
#include "text/vocabulary.h"

namespace nmt {

// The translation of one input line. A line split into several sentences (TextOptions) is
// searched sentence by sentence and joined here: hypothesis k joins each sentence's k-th best (its
// last when it has fewer), its tokens those of the sentences in order, its log-probability and
// score their sums, its attention block by block over the line's source pieces (each sentence's
// weight on its own end of sentence goes to the line's); text k joins their texts with the
// line's spacing.
struct Translation {
  std::vector<std::string> source_pieces;  // the source subwords (attention columns, without EOS)
  // Tokens the search saw in front of the source subwords, which are not pieces of the text: a
  // multilingual model's target-language token (text/languages.h). finish_translation takes their
  // columns out of the attention, so that its columns are the source pieces' and EOS.
  size_t source_tags = 0;
  std::vector<Hypothesis> hypotheses;  // n-best, best first; empty for an empty input line
  std::vector<std::string> texts;      // detokenized text of each hypothesis
  std::vector<std::string> sentences;  // what was translated: the line's sentences, or the line
  // Indices into `sentences` of those whose best translation stopped at an output cap
  // (--max-length-ratio, --max-output-length) instead of ending by itself.
  std::vector<size_t> capped;
  // Indices into `sentences` of those that are parts of a longer sentence, cut at clause
  // boundaries (--cut-sentences); a sentence's parts are consecutive.
  std::vector<size_t> cut;
  // The tokens of the best hypothesis that each sentence gave, in order (0 for a sentence with
  // no subwords).
  std::vector<size_t> sentence_tokens;
  // Why the line's markup was read as text (--markup; text/markup.h), or "".
  std::string markup_problem;
};

// Lines given beside the input: one per input line, an empty line for none; `name` (the file they
// come from) and the line number (after `first_line` lines of the file) go into errors. No lines,
// or only empty ones: none given.
struct LineGuide {
  std::vector<std::string> lines;
  std::string name;
  size_t first_line = 0;
  // When lines are a split input's sentences: the input line (0-based, before first_line) of each.
  std::vector<size_t> line_of{};

  bool given() const;
  // The 1-based number in the file of the line lines[index] belongs to.
  size_t number(size_t index) const { return first_line + (line_of.empty() ? index : line_of[index]) + 1; }
  // "name:N" for lines[index].
  std::string where(size_t index) const;
};

// What Translator::translate may be given besides the input.
struct TargetGuides {
  // Each output starts with its line's prefix (search.h).
  LineGuide prefixes{{}, "prefix"};
  // Each output contains every phrase of its line, phrases separated by tabs (search/constraints.h);
  // beam search, also at beam size 1.
  LineGuide constraints{{}, "constraints"};
};

class Translator {
 public:
  // `model`: one Seq2Seq, or an Ensemble of models that share the vocabularies. With a `shortlist`
  // (checked against the vocabularies), each batch searches over its union (search/shortlist.h),
  // and on a CPU a batch holds at most the shortlist's batch_sentences sentences.
  // `text`: whether lines are split into sentences, and by which language's rules (the model's
  // source-language when text.source_language is empty; the rules all languages share when
  // neither names one); its markup and protected spans (text/protect.h), put back into each text.
  // text.target_language picks the target-language token put in front of each sentence (a
  // multilingual model's, text/languages.h: target_language_id).
  // Throws std::invalid_argument naming the option of a value of `text` that is wrong.
  Translator(Ensemble model, Vocabulary source_vocabulary, Vocabulary target_vocabulary, SearchOptions search,
             BatchingOptions batching, const TextOptions& text, torch::Device device,
             std::shared_ptr<const Shortlist> shortlist = nullptr);

  // One Translation per line, in input order. `progress(lines_done)` runs after each batch.
  // With `guides`, each output starts with its line's prefix and contains its line's constraints;
  // a prefix or constraints that reach the line's output limit are an error naming the guide's
  // name and line. A line with a prefix or constraints is translated whole, never split.
  // `subwords`: each line's source ids as the source vocabulary's encode() gave them, which are
  // then not encoded again (nmt serve encodes each line to check it), or none.
  std::vector<Translation> translate(const std::vector<std::string>& lines,
                                     const std::function<void(size_t)>& progress = {}, const TargetGuides& guides = {},
                                     std::vector<std::vector<int64_t>> subwords = {});

  // The sentence splitter lines go through, or null when they are not split.
  const SentenceSplitter* splitter() const { return splitter_.get(); }

 private:
  // translate() without splitting: each line one sentence, searched with `search_options`.
  std::vector<Translation> translate_sentences(const std::vector<std::string>& lines,
                                               const std::function<void(size_t)>& progress, const TargetGuides& guides,
                                               std::vector<std::vector<int64_t>> subwords,
                                               const SearchOptions& search_options);
  std::vector<std::vector<int64_t>> plan_batches(const std::vector<std::vector<int64_t>>& sources,
                                                 const std::vector<int64_t>& order) const;
  SearchResult search_shortlisted(const std::vector<const std::vector<int64_t>*>& sources, const torch::Tensor& source,
                                  const torch::Tensor& lengths, const SearchOptions& options,
                                  const torch::Tensor& prefix, const BatchConstraints& constraints) const;

  Ensemble model_;
  Vocabulary source_vocabulary_;
  Vocabulary target_vocabulary_;
  SearchOptions search_;
  BatchingOptions batching_;
  torch::Device device_;
  std::shared_ptr<const Shortlist> shortlist_;
  std::shared_ptr<const SentenceSplitter> splitter_;
  std::shared_ptr<const Framer> framer_;        // null: lines are translated as text, nothing protected
  std::shared_ptr<const ClauseCutter> cutter_;  // null: no sentence is cut
  int64_t source_tag_ = -1;                     // the target-language token's id, or -1 for none
};

// The id of the target-language token that asks `model` for `language` (text/languages.h:
// target_language_id, its errors naming `name`), or -1 for a model of one target language. The
// members of an ensemble must know the same languages.
int64_t target_language_tag(const std::string& language, const Ensemble& model, const Vocabulary& source_vocabulary,
                            const std::string& name = "--target-language");

// One line's Translation from its sentences' (as Translation's comment says), the texts joined
// with `split`'s gaps; `sentences` holds one Translation per sentence of `split`, each with its
// `sentences` and `capped` as translate_sentences gave them.
Translation join_translations(const SplitLine& split, std::vector<Translation> sentences);

// Lines as the sentences they are translated as, and the way back to lines.
struct SentencePlan {
  std::vector<Frame> frames;                   // per line, when framed: what is put back
  std::vector<SplitLine> splits;               // per line: its (framed) text's sentences
  std::vector<size_t> first;                   // line i's sentences: [first[i], first[i + 1])
  std::vector<std::string> sentences;          // all lines' sentences, in line order
  std::vector<std::vector<int64_t>> subwords;  // per sentence, when given per line or counted for cutting
  TargetGuides guides;                         // per sentence, naming the input line
  bool needs_alignment = false;                // a frame has items to place by the attention
  bool attention_for_frames = false;           // the search keeps attention for them only

  // The lines all of whose sentences are among the first `sentences_done` (an estimate for
  // progress lines: sentences are translated longest first).
  size_t lines_done(size_t sentences_done) const;
  // The line `sentence` belongs to: the one after the lines of the sentences before it.
  size_t line_of(size_t sentence) const { return lines_done(sentence); }
};
// Frames each line with `framer` (null: none), then splits its text with `splitter` (null: none
// is split) and cuts its long sentences with `cutter` (null: none is cut); a line with a prefix or
// constraints (`guides`) stays whole.
// `subwords`: each line's source ids (Translator::translate), or none. Throws
// std::invalid_argument naming the line (1-based within `lines`) when one is not valid UTF-8.
SentencePlan plan_sentences(const SentenceSplitter* splitter, const Framer* framer, const ClauseCutter* cutter,
                            const std::vector<std::string>& lines, const TargetGuides& guides,
                            std::vector<std::vector<int64_t>> subwords, const Vocabulary& source_vocabulary);
// One Translation per line of `plan` from one per sentence (join_translations), each framed line's
// texts with its frame put back (restore_frame).
std::vector<Translation> join_lines(const SentencePlan& plan, std::vector<Translation> sentences,
                                    const Vocabulary& source_vocabulary, const Vocabulary& target_vocabulary);
// `line`'s texts with `frame` put back (text/frame.h), from `sentences`, the translations of
// `split`'s sentences that joined into `line`: the target words tied to the source pieces by each
// hypothesis's attention, or by their places when it has none.
void restore_frame(const Frame& frame, const SplitLine& split, const std::vector<Translation>& sentences,
                   Translation& line, const Vocabulary& source_vocabulary, const Vocabulary& target_vocabulary);
// The Framer `text` asks for over `source_vocabulary`, or null when it asks for none.
std::shared_ptr<const Framer> text_framer(const TextOptions& text, const Vocabulary& source_vocabulary);

// The splitter of `language` (text/sentences.h), made once per language and shared.
std::shared_ptr<const SentenceSplitter> sentence_splitter(const std::string& language);
// The splitter `text` asks for with `model` (its first member's source-language when
// text.source_language is empty), or null when text.split_sentences is off.
std::shared_ptr<const SentenceSplitter> text_splitter(const TextOptions& text, const Ensemble& model);
// The cutter of long sentences `text` asks for (--cut-sentences; "auto": the first member's
// training max-length) over `source_vocabulary`, or null when it asks for none.
std::shared_ptr<const ClauseCutter> text_cutter(const TextOptions& text, const Ensemble& model,
                                                const Vocabulary& source_vocabulary);

// A line of constraint phrases separated by tabs as target phrases (empty ones skipped; with
// `backwards`, for a right-to-left model, each phrase's tokens in its order). Throws
// std::invalid_argument starting with `where` when a phrase holds text the vocabulary lacks
// (<unk>), when they are more than kMaxConstraintPhrases, or when their tokens and the sentence's
// `prefix_tokens` reach `limit`, its output length cap.
SentenceConstraints encode_constraints(const std::string& line, const Vocabulary& target_vocabulary, bool backwards,
                                       int64_t prefix_tokens, int64_t limit, const std::string& where);

// A line as the search takes it: the target-language token `tag` (unless -1), its source subwords'
// ids and EOS, or none for an empty line (or only whitespace); the subwords go into
// `translation`'s source_pieces, and the token into its source_tags.
std::vector<int64_t> source_ids(const std::string& line, const Vocabulary& source_vocabulary, Translation& translation,
                                int64_t tag = -1);
// The same from the line's subwords as source_vocabulary.encode() gave them.
std::vector<int64_t> source_ids(std::vector<int64_t> subwords, const Vocabulary& source_vocabulary,
                                Translation& translation, int64_t tag = -1);
// Fills `translation`'s texts from its hypotheses, turning a right-to-left model's (`backwards`)
// around first, and its `sentences` ({sentence}) and `capped` (the caps of `search`); takes the
// columns of its source_tags out of each hypothesis's attention.
void finish_translation(Translation& translation, const std::string& sentence, const Vocabulary& target_vocabulary,
                        const SearchOptions& search, bool backwards);

// Best hypothesis text of each translation ("" for empty lines).
std::vector<std::string> best_texts(const std::vector<Translation>& translations);

}  // namespace nmt
