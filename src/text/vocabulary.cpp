#include "text/vocabulary.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "text/special_tokens.h"

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

std::string Vocabulary::piece(int64_t id) const { return processor_->IdToPiece(static_cast<int>(id)); }

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
       << " --pad_id=" << kPadId << " --unk_id=" << kUnkId << " --bos_id=" << kBosId << " --eos_id=" << kEosId
       << " --num_threads=" << options.threads
       << " --input_sentence_size=2000000 --shuffle_input_sentence=true --minloglevel=2";
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
