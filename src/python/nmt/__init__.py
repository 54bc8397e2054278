"""nmt: attentional GRU neural machine translation from Python.

The same C++ as the ``nmt`` command, loaded once into the process::

    import nmt
    translator = nmt.Translator("models/demo")
    results = translator.translate_batch(["ein Hund läuft ."], beam_size=5)
    print(results[0].text, results[0].score)

    bleu = nmt.evaluate.bleu(hypotheses, references)
    model_dir = nmt.train(config="configs/demo.toml", max_steps=200)

Messages (a training run's progress, warnings) go to Python's logging, logger ``nmt``.
"""

from ._nmt import (
    Hypothesis,
    ScoreResult,
    TranslationResult,
    Translator,
    __version__,
    train,
)
from . import evaluate

__all__ = [
    "Hypothesis",
    "ScoreResult",
    "TranslationResult",
    "Translator",
    "evaluate",
    "train",
    "__version__",
]
