"""Corpus BLEU and chrF exactly as sacreBLEU 2.x computes them, and as ``nmt evaluate`` prints them.

    score = nmt.evaluate.bleu(hypotheses, references)   # references: a list of str, or a list of lists
    print(score.score, score.signature)                 # 34.12 nrefs:1|case:mixed|eff:no|tok:13a|...
    print(nmt.evaluate.chrf(hypotheses, references))    # chrF2 = 58.34
"""

from ._nmt import evaluate as _evaluate

BleuScore = _evaluate.BleuScore
ChrfScore = _evaluate.ChrfScore
bleu = _evaluate.bleu
chrf = _evaluate.chrf

__all__ = ["BleuScore", "ChrfScore", "bleu", "chrf"]
