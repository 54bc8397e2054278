#include "text/vocabulary.h"

#include <sentencepiece.pb.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "text/special_tokens.h"
#include "text/words.h"

namespace nmt {

Vocabulary Vocabulary::from_serialized(const std::string& model_proto, const std::string& origin) {
  auto processor = std::make_shared<sentencepiece::SentencePieceProcessor>();
  const auto status = processor->LoadFromSerializedProto(model_proto);
  if (!status.ok()) {
    throw std::runtime_error(origin + ": not a sentencepiece model (" + status.ToString() + ")");
  }
  if (processor->pad_id() != kPadId || processor->unk_id() != kUnkId || processor->bos_id() != kBosId ||
      processor->eos_id() != kEosId) {
    throw std::runtime_error(origin +
                             ": sentencepiece model has other special ids than pad=0 unk=1 "
                             "bos=2 eos=3; train vocabularies with nmt train");
  }
  Vocabulary vocabulary;
  vocabulary.processor_ = std::move(processor);
  vocabulary.serialized_ = model_proto;
  return vocabulary;
}

std::vector<int64_t> Vocabulary::encode(const std::string& text) const {
  const std::vector<int> ids = processor_->EncodeAsIds(text);
  return {ids.begin(), ids.end()};
}

std::string Vocabulary::decode(const std::vector<int64_t>& ids) const {
  std::vector<int> kept;
  kept.reserve(ids.size());
  for (int64_t id : ids) {
    if (id != kPadId && id != kBosId && id != kEosId) kept.push_back(static_cast<int>(id));
  }
  return processor_->DecodeIds(kept);
}

std::vector<int64_t> Vocabulary::encode(const std::string& text, std::vector<ByteSpan>* spans) const {
  sentencepiece::SentencePieceText pieces;
  const auto status = processor_->Encode(text, &pieces);
  if (!status.ok()) throw std::runtime_error("sentencepiece: " + status.ToString());
  std::vector<int64_t> ids;
  spans->clear();
  for (const auto& piece : pieces.pieces()) {
    ids.push_back(piece.id());
    spans->push_back({piece.begin(), piece.end()});
  }
  return ids;
}

std::string Vocabulary::decode(const std::vector<int64_t>& ids, std::vector<ByteSpan>* spans) const {
  std::vector<int> kept;
  std::vector<size_t> kept_at;  // the index in `ids` of each kept id
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == kPadId || ids[i] == kBosId || ids[i] == kEosId) continue;
    kept.push_back(static_cast<int>(ids[i]));
    kept_at.push_back(i);
  }
  sentencepiece::SentencePieceText pieces;
  const auto status = processor_->Decode(kept, &pieces);
  if (!status.ok()) throw std::runtime_error("sentencepiece: " + status.ToString());
  spans->assign(ids.size(), ByteSpan{});
  for (int i = 0; i < pieces.pieces_size() && i < static_cast<int>(kept_at.size()); ++i) {
    (*spans)[kept_at[i]] = {pieces.pieces(i).begin(), pieces.pieces(i).end()};
  }
  // A special id takes the place after the text before it.
  for (size_t i = 1; i < ids.size(); ++i) {
    if ((*spans)[i].begin == 0 && (*spans)[i].end == 0) (*spans)[i] = {(*spans)[i - 1].end, (*spans)[i - 1].end};
  }
  return pieces.text();
}

std::vector<int64_t> Vocabulary::sample_encode(const std::string& text, int nbest, double alpha) const {
  std::vector<int> drawn;
  const auto status = processor_->SampleEncode(text, nbest, static_cast<float>(alpha), &drawn);
  if (!status.ok()) throw std::runtime_error("sentencepiece: " + status.ToString());
  return {drawn.begin(), drawn.end()};
}

bool Vocabulary::is_control(int64_t id) const { return processor_->IsControl(static_cast<int>(id)); }

bool Vocabulary::is_fallback(int64_t id) const { return id == kUnkId || processor_->IsByte(static_cast<int>(id)); }

namespace {

// Whether `vocabulary` encodes lines as its words one by one: probes with repeated, leading,
// trailing and other spaces, punctuation and letters outside ASCII.
bool encodes_word_by_word(const Vocabulary& vocabulary) {
  const std::vector<std::string> probes = {"a b", "  Ein  Hund läuft .  ", "x\t y", "\xc2\xa0z \xe3\x80\x80w",
                                           "A. (B) 12,5 %"};
  for (const std::string& line : probes) {
    std::vector<int64_t> joined;
    for_each_word(line, [&](size_t start, size_t length) {
      const std::vector<int64_t> word = vocabulary.encode(line.substr(start, length));
      joined.insert(joined.end(), word.begin(), word.end());
    });
    if (joined != vocabulary.encode(line)) return false;
  }
  return true;
}

}  // namespace

WordCachedEncoder::WordCachedEncoder(const Vocabulary& vocabulary, size_t max_words)
    : vocabulary_(vocabulary), max_words_(max_words) {
  const char* setting = std::getenv("NMT_WORD_CACHE");
  caching_ = (setting == nullptr || std::strcmp(setting, "off") != 0) && encodes_word_by_word(vocabulary);
}

std::vector<int64_t> WordCachedEncoder::encode(const std::string& line) {
  if (!caching_) return vocabulary_.encode(line);
  std::vector<int64_t> ids;
  for_each_word(line, [&](size_t start, size_t length) {
    key_.assign(line, start, length);
    auto found = words_.find(key_);
    if (found == words_.end()) {
      std::vector<int64_t> word = vocabulary_.encode(key_);
      if (words_.size() >= max_words_) {  // full: encoded, not kept
        ids.insert(ids.end(), word.begin(), word.end());
        return;
      }
      found = words_.emplace(key_, std::move(word)).first;
    }
    ids.insert(ids.end(), found->second.begin(), found->second.end());
  });
  return ids;
}

std::string Vocabulary::piece(int64_t id) const { return processor_->IdToPiece(static_cast<int>(id)); }

int64_t Vocabulary::tag_id(const std::string& tag) const {
  const int id = processor_->PieceToId(tag);
  return id != kUnkId && processor_->IsControl(id) && id > kEosId ? id : -1;
}

int Vocabulary::placeholder_tokens() const {
  int count = 0;
  for (int number = 1; number <= kPlaceholderTokens; ++number) {
    const std::string token = placeholder_token(number);
    const std::vector<int64_t> ids = encode(token);
    if (std::none_of(ids.begin(), ids.end(), [&](int64_t id) { return piece(id) == token; })) break;
    ++count;
  }
  return count;
}

int64_t Vocabulary::size() const { return processor_->GetPieceSize(); }

namespace {

class VectorSentenceIterator : public sentencepiece::SentenceIterator {
 public:
  explicit VectorSentenceIterator(const std::vector<const std::vector<std::string>*>& sources) : sources_(sources) {
    skip_exhausted();
  }
  bool done() const override { return source_ >= sources_.size(); }
  void Next() override {
    ++line_;
    skip_exhausted();
  }
  const std::string& value() const override { return (*sources_[source_])[line_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  void skip_exhausted() {
    while (source_ < sources_.size() && line_ >= sources_[source_]->size()) {
      ++source_;
      line_ = 0;
    }
  }
  const std::vector<const std::vector<std::string>*>& sources_;
  size_t source_ = 0;
  size_t line_ = 0;
};

}  // namespace

const EnumNames<VocabType>& vocab_type_names() {
  static const EnumNames<VocabType> names = {{"unigram", VocabType::kUnigram}, {"bpe", VocabType::kBpe}};
  return names;
}

std::string to_string(VocabType value) { return name_of(vocab_type_names(), value); }

std::string train_vocabulary(const std::vector<const std::vector<std::string>*>& sentences,
                             const VocabularyTrainingOptions& options) {
  std::ostringstream args;
  args << "--model_type=" << to_string(options.type) << " --vocab_size=" << options.size
       << " --hard_vocab_limit=false"  // tiny corpora get a smaller vocabulary instead of an error
       << " --character_coverage=1.0"
       << " --byte_fallback=" << (options.byte_fallback ? "true" : "false") << " --pad_id=" << kPadId
       << " --unk_id=" << kUnkId << " --bos_id=" << kBosId << " --eos_id=" << kEosId
       << " --num_threads=" << options.threads
       << " --input_sentence_size=2000000 --shuffle_input_sentence=true --minloglevel=2";
  for (size_t i = 0; i < options.tags.size(); ++i) args << (i == 0 ? " --control_symbols=" : ",") << options.tags[i];
  for (int number = 1; number <= options.placeholders; ++number) {
    args << (number == 1 ? " --user_defined_symbols=" : ",") << placeholder_token(number);
  }
  sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned int>(options.seed));
  VectorSentenceIterator iterator(sentences);
  std::string model_proto;
  const auto status = sentencepiece::SentencePieceTrainer::Train(args.str(), &iterator, &model_proto);
  if (!status.ok()) {
    const std::string reason = status.ToString();
    if (reason.find("vocab_size") != std::string::npos || reason.find("Vocabulary size") != std::string::npos) {
      throw std::invalid_argument("vocab-size " + std::to_string(options.size) +
                                  " cannot be reached on this corpus (sentencepiece: " + reason +
                                  "); choose another vocab-size");
    }
    throw std::runtime_error("sentencepiece training failed: " + reason);
  }
  return model_proto;
}

}  // namespace nmt
