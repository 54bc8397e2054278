"""nmt.evaluate against nmt evaluate: the same BLEU, chrF and signatures."""

import json

import pytest

import nmt


@pytest.fixture(scope="module")
def texts(toy):
    hypotheses = (toy / "dev.tgt").read_text(encoding="utf-8").splitlines()
    references = (toy / "test.tgt").read_text(encoding="utf-8").splitlines()
    # Hypotheses that share n-grams with the references: every other reference, cut short.
    hypotheses = [ref if i % 2 else " ".join(ref.split()[:4]) for i, ref in enumerate(references)]
    return hypotheses, references, (toy / "dev.tgt").read_text(encoding="utf-8").splitlines()


def evaluate_command(run_nmt, tmp_path, hypotheses, *reference_streams, options=()):
    hyp = tmp_path / "hyp"
    hyp.write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")
    arguments = ["evaluate", "--hyp", hyp, "--json", *options]
    for k, stream in enumerate(reference_streams):
        ref = tmp_path / f"ref{k}"
        ref.write_text("".join(r + "\n" for r in stream), encoding="utf-8")
        arguments += ["--ref", ref]
    return json.loads(run_nmt(*arguments).stdout)


def test_bleu_and_chrf_equal_the_command(run_nmt, tmp_path, texts):
    hypotheses, references, second = texts
    expected = evaluate_command(run_nmt, tmp_path, hypotheses, references)
    bleu = nmt.evaluate.bleu(hypotheses, references)
    chrf = nmt.evaluate.chrf(hypotheses, references)
    assert 20 < bleu.score < 90
    assert bleu.score == expected["bleu"] and bleu.signature == expected["bleu_signature"]
    assert list(bleu.precisions) == expected["bleu_precisions"] and bleu.bp == expected["brevity_penalty"]
    assert bleu.sys_len == expected["hyp_length"] and bleu.ref_len == expected["ref_length"]
    assert chrf.score == expected["chrf"] and chrf.signature == expected["chrf_signature"]
    assert str(bleu).startswith(f"BLEU = {bleu.score:.2f} ") and float(bleu) == bleu.score
    assert str(chrf) == f"chrF2 = {chrf.score:.2f}"

    several = evaluate_command(run_nmt, tmp_path, hypotheses, references, second)
    assert nmt.evaluate.bleu(hypotheses, [references, second]).score == several["bleu"]
    assert nmt.evaluate.chrf(hypotheses, [references, second]).score == several["chrf"]

    lowercase = evaluate_command(run_nmt, tmp_path, hypotheses, references, options=["--lowercase"])
    assert nmt.evaluate.bleu(hypotheses, references, lowercase=True).score == lowercase["bleu"]
    assert "case:lc" in nmt.evaluate.bleu(hypotheses, references, lowercase=True).signature


def test_bad_references_raise_value_error(texts):
    hypotheses, references, _ = texts
    with pytest.raises(ValueError, match="lines"):
        nmt.evaluate.bleu(hypotheses, references[:-1])
    with pytest.raises(ValueError):
        nmt.evaluate.chrf(["a"], [""])
    with pytest.raises(ValueError, match="tokenize"):
        nmt.evaluate.bleu(hypotheses, references, tokenize="intl")
