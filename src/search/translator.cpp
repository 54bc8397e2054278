#include "search/translator.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <numeric>

#include "model/options.h"
#include "search/memory.h"
#include "text/batching.h"
#include "text/languages.h"
#include "text/special_tokens.h"
#include "util/device_rules.h"
#include "util/format.h"
#include "util/runtime.h"

namespace nmt {
namespace {

// Decoder rows per step (sentences x beam) up to which batches are decoded in parallel.
constexpr size_t kMaxRowsForWorkers = 256;

// The search as the memory bounds see it: sampling runs one row per sentence, whatever --beam-size.
SearchOptions rows_per_sentence(SearchOptions options) {
  if (options.samples()) options.beam_size = 1;
  return options;
}

// A right-to-left model's hypothesis in text order: its tokens, and the attention rows of its tokens
// (a row for EOS stays last).
void turn_around(Hypothesis& hypothesis) {
  std::reverse(hypothesis.tokens.begin(), hypothesis.tokens.end());
  if (!hypothesis.attention.defined()) return;
  const auto tokens = static_cast<int64_t>(hypothesis.tokens.size());
  hypothesis.attention = torch::cat({hypothesis.attention.narrow(0, 0, tokens).flip(0),
                                     hypothesis.attention.narrow(0, tokens, hypothesis.attention.size(0) - tokens)});
}

bool has_attention(const Ensemble& model) {
  const auto& members = model.members();
  return std::any_of(members.begin(), members.end(),
                     [](const auto& member) { return member->options().attention != kNoAttention; });
}

// Each target token's most attended source piece and each source piece's most attending target
// token, from `attention` [rows >= targets, columns > sources] (the last column EOS); by their
// places in the two sequences when there is none.
TokenAlignment token_alignment(const torch::Tensor& attention, size_t targets, size_t sources) {
  TokenAlignment alignment;
  alignment.source_of_target.assign(targets, -1);
  alignment.target_of_source.assign(sources, -1);
  if (targets == 0 || sources == 0) return alignment;
  const auto rows = static_cast<int64_t>(targets), columns = static_cast<int64_t>(sources);
  if (attention.defined() && attention.size(0) >= rows && attention.size(1) > columns) {
    const torch::Tensor weights = attention.narrow(0, 0, rows).narrow(1, 0, columns).to(torch::kFloat32).contiguous();
    const torch::Tensor by_row = weights.argmax(1), by_column = weights.argmax(0);
    const auto row_best = by_row.accessor<int64_t, 1>();
    const auto column_best = by_column.accessor<int64_t, 1>();
    for (int64_t t = 0; t < rows; ++t) alignment.source_of_target[t] = static_cast<int>(row_best[t]);
    for (int64_t q = 0; q < columns; ++q) alignment.target_of_source[q] = static_cast<int>(column_best[q]);
    return alignment;
  }
  for (size_t t = 0; t < targets; ++t) alignment.source_of_target[t] = static_cast<int>(t * sources / targets);
  for (size_t q = 0; q < sources; ++q) alignment.target_of_source[q] = static_cast<int>(q * targets / sources);
  return alignment;
}

// A sentence's k-th best hypothesis, or its last when it has fewer (it has at least one).
size_t kth(const Translation& sentence, size_t k) { return std::min(k, sentence.hypotheses.size() - 1); }

// Hypothesis `k` of a line from those of its sentences (Translation's comment).
Hypothesis join_hypotheses(const std::vector<Translation>& sentences, size_t k) {
  Hypothesis joined;
  bool attention = true;
  int64_t rows = 0, columns = 1;     // the line's EOS column
  const Hypothesis* last = nullptr;  // that of the last sentence with one
  for (const Translation& sentence : sentences) {
    if (sentence.hypotheses.empty()) continue;
    const Hypothesis& own = sentence.hypotheses[kth(sentence, k)];
    joined.tokens.insert(joined.tokens.end(), own.tokens.begin(), own.tokens.end());
    joined.log_probability += own.log_probability;
    joined.score += own.score;
    attention = attention && own.attention.defined();
    rows += static_cast<int64_t>(own.tokens.size());
    columns += static_cast<int64_t>(sentence.source_pieces.size());
    last = &own;
  }
  if (!attention || last == nullptr) return joined;
  // The last sentence's EOS row (when its search ended with EOS) is the line's.
  const bool eos_row = last->attention.size(0) > static_cast<int64_t>(last->tokens.size());
  joined.attention = torch::zeros({rows + (eos_row ? 1 : 0), columns}, torch::kFloat32);
  int64_t row = 0, column = 0;
  for (const Translation& sentence : sentences) {
    if (sentence.hypotheses.empty()) continue;
    const Hypothesis& own = sentence.hypotheses[kth(sentence, k)];
    const auto pieces = static_cast<int64_t>(sentence.source_pieces.size());
    const int64_t own_rows = static_cast<int64_t>(own.tokens.size()) + (&own == last && eos_row ? 1 : 0);
    const torch::Tensor weights = own.attention.to(torch::kFloat32).narrow(0, 0, own_rows);
    joined.attention.narrow(0, row, own_rows).narrow(1, column, pieces).copy_(weights.narrow(1, 0, pieces));
    joined.attention.narrow(0, row, own_rows).select(1, columns - 1).copy_(weights.select(1, pieces));
    row += own_rows;
    column += pieces;
  }
  return joined;
}

// How many batches to decode at once. On the CPU, small batches decode faster side by side, one
// batch per thread with single-threaded operators, than one after another with each operator split
// across the threads; above about kMaxRowsForWorkers rows per step splitting the operators is
// faster (docs/dev/performance-notes.md). Only with a batch for every thread: otherwise splitting
// the operators keeps all cores busy.
size_t workers_for(const std::vector<std::vector<int64_t>>& batches, int64_t beam_size, const torch::Device& device) {
  size_t largest_batch = 0;
  for (const auto& batch : batches) largest_batch = std::max(largest_batch, batch.size());
  const bool small_steps = largest_batch * static_cast<size_t>(beam_size) <= kMaxRowsForWorkers;
  const auto threads = static_cast<size_t>(torch::get_num_threads());
  return small_steps && batches.size() >= threads ? batch_workers(device, threads) : 1;
}

}  // namespace

Translation join_translations(const SplitLine& split, std::vector<Translation> sentences) {
  if (sentences.size() != split.sentences.size()) {
    throw std::invalid_argument("join_translations: one translation per sentence");
  }
  if (sentences.size() == 1 && split.gaps.front().empty() && split.gaps.back().empty()) return std::move(sentences[0]);
  Translation line;
  size_t n_best = 0;
  for (size_t i = 0; i < sentences.size(); ++i) {
    Translation& sentence = sentences[i];
    line.source_pieces.insert(line.source_pieces.end(), sentence.source_pieces.begin(), sentence.source_pieces.end());
    line.sentences.push_back(split.sentences[i]);
    if (!sentence.capped.empty()) line.capped.push_back(i);
    if (std::binary_search(split.cut.begin(), split.cut.end(), i)) line.cut.push_back(i);
    line.sentence_tokens.push_back(sentence.sentence_tokens.empty() ? 0 : sentence.sentence_tokens[0]);
    n_best = std::max(n_best, sentence.hypotheses.size());
  }
  for (size_t k = 0; k < n_best; ++k) {
    line.hypotheses.push_back(join_hypotheses(sentences, k));
    std::vector<std::string> texts;
    for (const Translation& sentence : sentences) {
      texts.push_back(sentence.texts.empty() ? "" : sentence.texts[kth(sentence, k)]);
    }
    line.texts.push_back(join_sentences(split, texts));
  }
  return line;
}

void restore_frame(const Frame& frame, const SplitLine& split, const std::vector<Translation>& sentences,
                   Translation& line, const Vocabulary& source_vocabulary, const Vocabulary& target_vocabulary) {
  if (line.hypotheses.empty()) {  // nothing to translate, but what the frame holds: one empty hypothesis
    line.hypotheses.emplace_back();
    line.texts = {place_frame(frame, "", {}, {}, {})};
    return;
  }
  // The bytes of the framed text each source piece came from, sentence by sentence.
  std::vector<ByteSpan> source_spans;
  std::vector<size_t> first_piece;  // per sentence
  size_t at = 0;
  for (size_t i = 0; i < split.sentences.size(); ++i) {
    at += split.gaps[i].size();
    first_piece.push_back(source_spans.size());
    if (!sentences[i].source_pieces.empty()) {
      std::vector<ByteSpan> spans;
      source_vocabulary.encode(split.sentences[i], &spans);
      spans.resize(sentences[i].source_pieces.size());  // the same encoder: the same pieces
      for (ByteSpan& span : spans) source_spans.push_back({span.begin + at, span.end + at});
    }
    at += split.sentences[i].size();
  }
  for (size_t k = 0; k < line.hypotheses.size(); ++k) {
    // Text k's tokens: each sentence's, their bytes moved to its place in the line, and each
    // sentence's alignment moved to its tokens and pieces.
    std::vector<ByteSpan> target_spans;
    TokenAlignment alignment;
    alignment.target_of_source.assign(source_spans.size(), -1);
    size_t offset = 0;
    for (size_t i = 0; i < sentences.size(); ++i) {
      offset += split.gaps[i].size();
      const Translation& sentence = sentences[i];
      if (sentence.hypotheses.empty()) continue;
      const Hypothesis& own = sentence.hypotheses[kth(sentence, k)];
      std::vector<ByteSpan> spans;
      target_vocabulary.decode(own.tokens, &spans);
      const auto first_token = static_cast<int>(target_spans.size());
      const auto piece = static_cast<int>(first_piece[i]);
      const TokenAlignment part = token_alignment(own.attention, own.tokens.size(), sentence.source_pieces.size());
      for (const int source : part.source_of_target)
        alignment.source_of_target.push_back(source < 0 ? -1 : source + piece);
      for (size_t q = 0; q < part.target_of_source.size(); ++q) {
        const int target = part.target_of_source[q];
        alignment.target_of_source[first_piece[i] + q] = target < 0 ? -1 : target + first_token;
      }
      for (ByteSpan& span : spans) target_spans.push_back({span.begin + offset, span.end + offset});
      offset += sentence.texts[kth(sentence, k)].size();
    }
    line.texts[k] = place_frame(frame, line.texts[k], target_spans, source_spans, alignment);
  }
}

std::shared_ptr<const SentenceSplitter> sentence_splitter(const std::string& language) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const SentenceSplitter>> made;
  std::lock_guard<std::mutex> lock(mutex);
  std::shared_ptr<const SentenceSplitter>& splitter = made[language];
  if (!splitter) splitter = std::make_shared<const SentenceSplitter>(language);
  return splitter;
}

Translator::Translator(Ensemble model, Vocabulary source_vocabulary, Vocabulary target_vocabulary, SearchOptions search,
                       BatchingOptions batching, const TextOptions& text, torch::Device device,
                       std::shared_ptr<const Shortlist> shortlist)
    : model_(std::move(model)),
      source_vocabulary_(std::move(source_vocabulary)),
      target_vocabulary_(std::move(target_vocabulary)),
      search_(search),
      batching_(batching),
      device_(device),
      shortlist_(std::move(shortlist)) {
  validate(search_);
  validate(batching_);
  validate(text);
  check_beam_fits_vocabulary(target_vocabulary_.size(), rows_per_sentence(search_));
  splitter_ = text_splitter(text, model_);
  framer_ = text_framer(text, source_vocabulary_);
  cutter_ = text_cutter(text, model_, source_vocabulary_);
  source_tag_ = target_language_tag(text.target_language, model_, source_vocabulary_);
}

int64_t target_language_tag(const std::string& language, const Ensemble& model, const Vocabulary& source_vocabulary,
                            const std::string& name) {
  const std::vector<std::string>& known = model.members().front()->options().target_languages;
  for (const auto& member : model.members()) {
    if (member->options().target_languages != known) {
      throw std::invalid_argument("the models of this ensemble translate into different languages (" +
                                  language_list(known) + "; " + language_list(member->options().target_languages) +
                                  "): ensemble models trained with the same train-languages");
    }
  }
  return target_language_id(known, source_vocabulary, language, name);
}

std::shared_ptr<const ClauseCutter> text_cutter(const TextOptions& text, const Ensemble& model,
                                                const Vocabulary& source_vocabulary) {
  const ModelOptions& options = model.members().front()->options();
  size_t most = cut_length(text, options.trained_length);
  // A multilingual model's target-language token counted in max-length when it trained.
  if (text.cut_sentences == "auto" && most > 1 && !options.target_languages.empty()) --most;
  if (most == 0) return nullptr;
  return std::make_shared<const ClauseCutter>(
      most, [source_vocabulary](std::string_view part) { return source_vocabulary.encode(std::string(part)).size(); });
}

std::shared_ptr<const Framer> text_framer(const TextOptions& text, const Vocabulary& source_vocabulary) {
  if (text.markup == "none" && text.placeholders == "none" && text.protect.empty()) return nullptr;
  return std::make_shared<const Framer>(text.markup, text.placeholders, text.protect, source_vocabulary,
                                        text.placeholder_tokens != "no");
}

std::shared_ptr<const SentenceSplitter> text_splitter(const TextOptions& text, const Ensemble& model) {
  if (!text.split_sentences) return nullptr;
  return sentence_splitter(text.source_language.empty() ? model.members().front()->options().source_language
                                                        : text.source_language);
}

// Batches of `order` (longest source first) by --batch-size, each cut further so that its search
// holds at most --max-search-memory, and on a CPU with a shortlist to at most the sentences its
// lists were sized for (shortlist.h: batch_sentences).
std::vector<std::vector<int64_t>> Translator::plan_batches(const std::vector<std::vector<int64_t>>& sources,
                                                           const std::vector<int64_t>& order) const {
  std::vector<int64_t> source_lengths(sources.size());
  for (size_t i = 0; i < sources.size(); ++i) source_lengths[i] = static_cast<int64_t>(sources[i].size());
  const auto lengths = [&](int64_t index) { return PaddedLengths{sources[index].size(), 0}; };
  const std::vector<std::vector<int64_t>> by_size =
      cut_batches(order, lengths, static_cast<size_t>(batching_.batch_size),
                  batching_.batch_in_tokens ? BatchCost::kPaddedTokens : BatchCost::kSentences);
  const auto shortlist_cap =
      shortlist_ && !queues_work(device_) ? static_cast<size_t>(shortlist_->sizes().batch_sentences) : size_t{0};
  std::vector<std::vector<int64_t>> batches;
  for (const std::vector<int64_t>& batch : by_size) {
    for (auto& piece : split_for_memory(batch, source_lengths, model_, target_vocabulary_.size(),
                                        rows_per_sentence(search_), int64_t{batching_.max_search_memory} << 20)) {
      if (shortlist_cap == 0) {
        batches.push_back(std::move(piece));
        continue;
      }
      for (auto& part : cut_batches(piece, lengths, shortlist_cap, BatchCost::kSentences)) {
        batches.push_back(std::move(part));
      }
    }
  }
  return batches;
}

// search() over the batch's shortlist: its sentences' lists, the frequent subwords, and the tokens
// of its prefixes and constraints. A list too short to fill the beam gives the whole vocabulary.
SearchResult Translator::search_shortlisted(const std::vector<const std::vector<int64_t>*>& sources,
                                            const torch::Tensor& source, const torch::Tensor& lengths,
                                            const SearchOptions& options, const torch::Tensor& prefix,
                                            const BatchConstraints& constraints) const {
  std::vector<int64_t> guides;
  if (prefix.defined()) {
    const torch::Tensor prefix_cpu = prefix.cpu().contiguous();
    guides.assign(prefix_cpu.data_ptr<int64_t>(), prefix_cpu.data_ptr<int64_t>() + prefix_cpu.numel());
  }
  for (const SentenceConstraints& phrases : constraints) {
    for (const Phrase& phrase : phrases) guides.insert(guides.end(), phrase.begin(), phrase.end());
  }
  const torch::Tensor ids = shortlist_->select(sources, guides);
  spdlog::debug("shortlist: {} of {} target subwords for a batch of {} sentences", ids.size(0),
                target_vocabulary_.size(), sources.size());
  if (ids.size(0) < kEosId + 1 + 2 * int64_t{options.beam_size}) {
    return search(model_, source, lengths, options, prefix, constraints);
  }
  return search_in_vocabulary(model_, ids.to(device_), source, lengths, options, prefix, constraints);
}

bool LineGuide::given() const {
  return std::any_of(lines.begin(), lines.end(), [](const std::string& line) { return !line.empty(); });
}

std::string LineGuide::where(size_t index) const { return name + ":" + std::to_string(number(index)); }

SentenceConstraints encode_constraints(const std::string& line, const Vocabulary& target_vocabulary, bool backwards,
                                       int64_t prefix_tokens, int64_t limit, const std::string& where) {
  SentenceConstraints phrases;
  for (size_t start = 0; start <= line.size();) {
    const size_t tab = std::min(line.find('\t', start), line.size());
    const std::string text = line.substr(start, tab - start);
    Phrase phrase = target_vocabulary.encode(text);
    start = tab + 1;
    if (phrase.empty()) continue;
    if (std::find(phrase.begin(), phrase.end(), kUnkId) != phrase.end()) {
      throw std::invalid_argument(where + ": \"" + format_excerpt(text) +
                                  "\" has characters the model's target vocabulary lacks, so no translation can "
                                  "contain it: leave them out");
    }
    if (backwards) std::reverse(phrase.begin(), phrase.end());  // the model writes it back to front
    phrases.push_back(std::move(phrase));
  }
  if (phrases.size() > kMaxConstraintPhrases) {
    throw std::invalid_argument(where + ": " + std::to_string(phrases.size()) + " phrases; at most " +
                                std::to_string(kMaxConstraintPhrases) + " per line");
  }
  const int64_t tokens = constraint_tokens(phrases);
  if (prefix_tokens + tokens >= limit) {
    throw std::invalid_argument(where + ": the constraints have " + std::to_string(tokens) + " subwords" +
                                (prefix_tokens > 0 ? " and the prefix " + std::to_string(prefix_tokens) : "") +
                                " but this sentence's output ends at " + std::to_string(limit) +
                                ": shorten them (or raise --max-length-ratio / --max-output-length)");
  }
  return phrases;
}

std::vector<Translation> Translator::translate(const std::vector<std::string>& lines,
                                               const std::function<void(size_t)>& progress, const TargetGuides& guides,
                                               std::vector<std::vector<int64_t>> subwords) {
  for (const LineGuide* guide : {&guides.prefixes, &guides.constraints}) {
    if (!guide->lines.empty() && guide->lines.size() != lines.size()) {
      throw std::invalid_argument(guide->name + " has " + std::to_string(guide->lines.size()) + " lines for " +
                                  std::to_string(lines.size()) + " input lines: give one per line");
    }
  }
  if (!splitter_ && !framer_ && !cutter_)
    return translate_sentences(lines, progress, guides, std::move(subwords), search_);
  SentencePlan plan = plan_sentences(splitter_.get(), framer_.get(), cutter_.get(), lines, guides, std::move(subwords),
                                     source_vocabulary_);
  std::function<void(size_t)> line_progress;
  if (progress) line_progress = [&](size_t done) { progress(plan.lines_done(done)); };
  SearchOptions search = search_;
  // Items go back by the attention, where the model has one.
  if (plan.needs_alignment && !search.return_attention && has_attention(model_)) {
    search.return_attention = plan.attention_for_frames = true;
  }
  return join_lines(plan,
                    translate_sentences(plan.sentences, line_progress, plan.guides, std::move(plan.subwords), search),
                    source_vocabulary_, target_vocabulary_);
}

size_t SentencePlan::lines_done(size_t sentences_done) const {
  return static_cast<size_t>(std::upper_bound(first.begin(), first.end(), sentences_done) - first.begin()) - 1;
}

SentencePlan plan_sentences(const SentenceSplitter* splitter, const Framer* framer, const ClauseCutter* cutter,
                            const std::vector<std::string>& lines, const TargetGuides& guides,
                            std::vector<std::vector<int64_t>> subwords, const Vocabulary& source_vocabulary) {
  if (!subwords.empty() && subwords.size() != lines.size()) {
    throw std::invalid_argument("plan_sentences: one list of subwords per line, or none");
  }
  SentencePlan plan;
  plan.splits.resize(lines.size());
  plan.first.assign(lines.size() + 1, 0);
  plan.guides = TargetGuides{{{}, guides.prefixes.name, guides.prefixes.first_line},
                             {{}, guides.constraints.name, guides.constraints.first_line}};
  const auto guided = [&](const LineGuide& guide, size_t i) {
    return !guide.lines.empty() && i < guide.lines.size() && !guide.lines[i].empty();
  };
  if (framer != nullptr) plan.frames.resize(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    plan.first[i] = plan.sentences.size();
    SplitLine& split = plan.splits[i];
    bool framed = false;  // its text is not the line
    if (framer != nullptr) {
      plan.frames[i] = framer->frame(lines[i]);
      framed = plan.frames[i].text != lines[i];
      plan.needs_alignment = plan.needs_alignment || !plan.frames[i].items.empty();
    }
    const std::string& text = framer != nullptr ? plan.frames[i].text : lines[i];
    // A prefix or constraints belong to the whole line: it is neither split nor cut.
    const bool kept_whole = guided(guides.prefixes, i) || guided(guides.constraints, i);
    try {
      split = splitter != nullptr && !kept_whole ? splitter->split(text) : SplitLine{{text}, {"", ""}};
    } catch (const std::invalid_argument& error) {
      throw std::invalid_argument("line " + std::to_string(i + 1) + " " + error.what());
    }
    const bool whole = split.sentences.size() == 1 && !framed;  // its subwords are the line's
    // Each sentence's ids when the plan keeps them (given, or counted for the cutter), so that the
    // translation encodes none again.
    std::vector<std::vector<int64_t>> ids;
    if (!subwords.empty() || cutter != nullptr) {
      for (const std::string& sentence : split.sentences) {
        ids.push_back(whole && !subwords.empty() ? std::move(subwords[i]) : source_vocabulary.encode(sentence));
      }
    }
    std::vector<size_t> origin;  // each sentence's index in the split before cutting
    if (cutter != nullptr && !kept_whole) {
      std::vector<size_t> lengths;
      for (const std::vector<int64_t>& sentence_ids : ids) lengths.push_back(sentence_ids.size());
      split = cut_sentences(*cutter, std::move(split), lengths, &origin);
    }
    for (size_t k = 0; k < split.sentences.size(); ++k) {
      const std::string& sentence = split.sentences[k];
      plan.sentences.push_back(sentence);
      if (!ids.empty()) {
        const bool part = std::binary_search(split.cut.begin(), split.cut.end(), k);
        plan.subwords.push_back(part ? source_vocabulary.encode(sentence)
                                     : std::move(ids[origin.empty() ? k : origin[k]]));
      }
      for (auto [all, part] : {std::pair{&guides.prefixes, &plan.guides.prefixes},
                               std::pair{&guides.constraints, &plan.guides.constraints}}) {
        if (all->lines.empty()) continue;
        part->lines.push_back(split.sentences.size() == 1 && i < all->lines.size() ? all->lines[i] : "");
        part->line_of.push_back(all->line_of.empty() ? i : all->line_of[i]);
      }
    }
  }
  plan.first[lines.size()] = plan.sentences.size();
  return plan;
}

std::vector<Translation> join_lines(const SentencePlan& plan, std::vector<Translation> sentences,
                                    const Vocabulary& source_vocabulary, const Vocabulary& target_vocabulary) {
  if (sentences.size() != plan.sentences.size())
    throw std::invalid_argument("join_lines: one translation per sentence");
  std::vector<Translation> lines(plan.splits.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    std::vector<Translation> own(std::make_move_iterator(sentences.begin() + plan.first[i]),
                                 std::make_move_iterator(sentences.begin() + plan.first[i + 1]));
    const Frame* frame = plan.frames.empty() || plan.frames[i].plain() ? nullptr : &plan.frames[i];
    std::vector<Translation> bare = frame != nullptr ? own : std::move(own);
    if (plan.attention_for_frames) {  // not asked for: the line's is not made
      for (Translation& sentence : bare) {
        for (Hypothesis& hypothesis : sentence.hypotheses) hypothesis.attention = torch::Tensor();
      }
    }
    lines[i] = join_translations(plan.splits[i], std::move(bare));
    if (frame != nullptr) restore_frame(*frame, plan.splits[i], own, lines[i], source_vocabulary, target_vocabulary);
    if (!plan.frames.empty()) lines[i].markup_problem = plan.frames[i].problem;
  }
  return lines;
}

std::vector<Translation> Translator::translate_sentences(const std::vector<std::string>& lines,
                                                         const std::function<void(size_t)>& progress,
                                                         const TargetGuides& guides,
                                                         std::vector<std::vector<int64_t>> subwords,
                                                         const SearchOptions& search_options) {
  if (!subwords.empty() && subwords.size() != lines.size()) {
    throw std::invalid_argument("Translator::translate: one list of subwords per line, or none");
  }
  const LineGuide& prefixes = guides.prefixes;
  const bool constrained = guides.constraints.given();
  if (constrained && search_options.samples()) {
    throw std::invalid_argument(guides.constraints.name +
                                ": terminology constraints need beam search: leave out the sampling options");
  }
  const bool backwards = model_.members().front()->options().reverse_target;
  if (backwards && !prefixes.lines.empty()) {
    throw std::invalid_argument(prefixes.name +
                                ": this model writes its translations right to left (reverse-target), so a prefix "
                                "would be their end: use a left-to-right model");
  }
  std::vector<Translation> translations(lines.size());
  std::vector<std::vector<int64_t>> sources(lines.size()), targets_start(lines.size());
  BatchConstraints constraints(constrained ? lines.size() : 0);
  std::vector<int64_t> order;
  for (size_t i = 0; i < lines.size(); ++i) {
    sources[i] = subwords.empty()
                     ? source_ids(lines[i], source_vocabulary_, translations[i], source_tag_)
                     : source_ids(std::move(subwords[i]), source_vocabulary_, translations[i], source_tag_);
    if (sources[i].empty()) continue;  // empty in, empty out
    order.push_back(static_cast<int64_t>(i));
    const int64_t limit = max_output_length(static_cast<int64_t>(sources[i].size()), search_options);
    if (!prefixes.lines.empty()) targets_start[i] = target_vocabulary_.encode(prefixes.lines[i]);
    if (static_cast<int64_t>(targets_start[i].size()) >= limit) {
      throw std::invalid_argument(prefixes.where(i) + ": the prefix has " + std::to_string(targets_start[i].size()) +
                                  " subwords but the output of line " + std::to_string(prefixes.number(i)) +
                                  " ends at " + std::to_string(limit) +
                                  ": shorten it, or raise --max-length-ratio or --max-output-length");
    }
    if (constrained) {
      constraints[i] =
          encode_constraints(guides.constraints.lines[i], target_vocabulary_, backwards,
                             static_cast<int64_t>(targets_start[i].size()), limit, guides.constraints.where(i));
    }
  }
  // Longest first: similar lengths share a batch (little padding), and the slowest batch is known early.
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return sources[a].size() > sources[b].size(); });
  const std::vector<std::vector<int64_t>> batches = plan_batches(sources, order);

  // A model in training mode is switched for the search and back; one in eval mode (as loaded,
  // inference/model.h) is left alone, so that several threads may translate with it at once.
  const bool was_training = model_.is_training();
  if (was_training) model_.train(false);
  std::mutex progress_mutex;
  size_t done = lines.size() - order.size();
  auto translate_batch = [&](size_t index) {
    torch::InferenceMode inference_mode;  // per thread
    const std::vector<int64_t>& batch = batches[index];
    std::vector<const std::vector<int64_t>*> batch_sources;
    for (const int64_t k : batch) batch_sources.push_back(&sources[k]);
    auto [source, lengths] = pad_sequences(batch_sources);
    SearchOptions options = search_options;
    options.sampling_stream = index;  // each batch samples on its own: the same on any thread
    torch::Tensor prefix;
    if (!prefixes.lines.empty()) {
      std::vector<const std::vector<int64_t>*> batch_prefixes;
      for (const int64_t k : batch) batch_prefixes.push_back(&targets_start[k]);
      prefix = pad_sequences(batch_prefixes).first.to(device_);
    }
    BatchConstraints batch_constraints;
    if (constrained) {
      for (const int64_t k : batch) batch_constraints.push_back(constraints[k]);
    }
    SearchResult result =
        shortlist_ ? search_shortlisted(batch_sources, source.to(device_), lengths, options, prefix, batch_constraints)
                   : search(model_, source.to(device_), lengths, options, prefix, batch_constraints);
    for (size_t row = 0; row < batch.size(); ++row) translations[batch[row]].hypotheses = std::move(result[row]);
    std::lock_guard<std::mutex> lock(progress_mutex);
    done += batch.size();
    if (progress) progress(done);
  };
  const size_t workers = workers_for(batches, rows_per_sentence(search_options).beam_size, device_);
  if (workers <= 1) {
    for (size_t index = 0; index < batches.size(); ++index) translate_batch(index);
  } else {
    run_in_parallel(workers, batches.size(), translate_batch);
  }
  for (size_t i = 0; i < lines.size(); ++i) {
    finish_translation(translations[i], lines[i], target_vocabulary_, search_options, backwards);
  }
  if (was_training) model_.train(true);
  return translations;
}

std::vector<int64_t> source_ids(const std::string& line, const Vocabulary& source_vocabulary, Translation& translation,
                                int64_t tag) {
  return source_ids(source_vocabulary.encode(line), source_vocabulary, translation, tag);
}

std::vector<int64_t> source_ids(std::vector<int64_t> ids, const Vocabulary& source_vocabulary, Translation& translation,
                                int64_t tag) {
  if (ids.empty()) return ids;
  for (int64_t id : ids) translation.source_pieces.push_back(source_vocabulary.piece(id));
  ids.push_back(kEosId);
  if (tag >= 0) {
    ids.insert(ids.begin(), tag);
    translation.source_tags = 1;
  }
  return ids;
}

void finish_translation(Translation& translation, const std::string& sentence, const Vocabulary& target_vocabulary,
                        const SearchOptions& search, bool backwards) {
  const auto tags = static_cast<int64_t>(translation.source_tags);
  for (auto& hypothesis : translation.hypotheses) {
    if (backwards) turn_around(hypothesis);
    translation.texts.push_back(target_vocabulary.decode(hypothesis.tokens));
    if (tags > 0 && hypothesis.attention.defined()) {
      hypothesis.attention = hypothesis.attention.narrow(1, tags, hypothesis.attention.size(1) - tags);
    }
  }
  if (translation.hypotheses.empty()) return;  // an empty line
  translation.sentences = {sentence};
  translation.sentence_tokens = {translation.hypotheses[0].tokens.size()};
  // A search ends at its cap with `limit` tokens and no EOS; one that ends by itself, sooner.
  const int64_t limit = max_output_length(static_cast<int64_t>(translation.source_pieces.size()) + tags + 1, search);
  if (static_cast<int64_t>(translation.hypotheses[0].tokens.size()) >= limit) translation.capped = {0};
}

std::vector<std::string> best_texts(const std::vector<Translation>& translations) {
  std::vector<std::string> texts;
  texts.reserve(translations.size());
  for (const auto& translation : translations) texts.push_back(translation.texts.empty() ? "" : translation.texts[0]);
  return texts;
}

}  // namespace nmt
