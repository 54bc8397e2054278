"""A multilingual model in Python: its languages, the target_language keyword, and the command's
errors for a language it lacks."""

import pytest

import nmt

from conftest import TOY, command_line, tiny_train_arguments


@pytest.fixture(scope="module")
def two_way_model(tmp_path_factory, run_nmt):
    """The toy corpus both ways: into the toy language ("eo" here) and back into English."""
    directory = tmp_path_factory.mktemp("multilingual") / "two_way"
    options = tiny_train_arguments(directory, steps=20, validate_every=20)
    options.update(train_source=f"{TOY / 'train.src'},{TOY / 'train.tgt'}",
                   train_target=f"{TOY / 'train.tgt'},{TOY / 'train.src'}", train_languages="eo,en",
                   dev_source=f"{TOY / 'dev.src'},{TOY / 'dev.tgt'}", dev_target=f"{TOY / 'dev.tgt'},{TOY / 'dev.src'}",
                   dev_languages="eo,en", vocab_size=300)
    run_nmt("train", *command_line(options))
    return directory


def test_target_language_picks_the_token_as_the_command_does(two_way_model, run_nmt, tmp_path):
    translator = nmt.Translator(str(two_way_model), threads=1)
    assert translator.target_languages == ["eo", "en"]
    lines = (TOY / "test.src").read_text(encoding="utf-8").splitlines()[:6]
    source = tmp_path / "input.txt"
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    for language in ("eo", "en"):
        command = run_nmt("translate", "--model", two_way_model, "--input", source, "--target-language", language,
                          "--quiet", "--threads", 1).stdout.splitlines()
        results = translator.translate_batch(lines, target_language=language, return_attention=True)
        assert [result.text for result in results] == command
        for result in results:
            assert not any(token.startswith("<2") for token in result.tokens)  # never written
            assert result.attention.shape[1] == len(result.source_tokens)  # the token's column is left out
    scores = {language: translator.score_batch(lines[:2], lines[:2], target_language=language)[0].score
              for language in ("eo", "en")}
    assert scores["eo"] != scores["en"]


def test_a_language_the_model_lacks_is_a_value_error_naming_its_languages(two_way_model):
    translator = nmt.Translator(str(two_way_model), threads=1)
    with pytest.raises(ValueError, match="this model translates into eo and en; say which"):
        translator.translate_batch(["A dog ."])
    with pytest.raises(ValueError, match="'fr' is not a target language of this model; it translates into eo and en"):
        translator.translate_batch(["A dog ."], target_language="fr")
    with pytest.raises(ValueError, match="'fr' is not a target language"):
        translator.score_batch(["A dog ."], ["Ein Hund ."], target_language="fr")
