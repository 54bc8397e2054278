# Type stubs of the nmt package (its compiled part is nmt._nmt). The tests check them against the module.
import os
from typing import List, Literal, Optional, Sequence, Tuple, TypedDict, Union

import numpy
from typing_extensions import Unpack

from . import evaluate as evaluate

__version__: str

_Path = Union[str, os.PathLike]

class SearchOptions(TypedDict, total=False):
    """nmt translate's search options (beam_size for --beam-size); defaults in help(Translator.translate_batch)."""

    beam_size: int
    length_penalty: float
    max_length_ratio: float
    max_output_length: int
    split_sentences: bool
    source_language: str
    target_language: str
    markup: Literal["none", "html", "xml"]
    placeholders: str
    protect: List[str]
    cut_sentences: str
    placeholder_tokens: Literal["auto", "no"]
    ban_unk: bool
    sampling: bool
    sampling_topk: int
    sampling_topp: float
    sampling_temperature: float
    seed: int
    batch_size: int
    batch_type: Literal["sentences", "tokens"]
    max_search_memory: int

class Hypothesis:
    text: str
    score: float
    log_probability: float
    tokens: List[str]
    attention: Optional[numpy.ndarray]
    alignment: Optional[List[Tuple[int, int]]]

class TranslationResult:
    n_best: List[Hypothesis]
    source_tokens: List[str]
    sentences: List[str]
    capped: List[int]
    cut: List[int]
    markup_problem: str
    confidence: Optional[float]
    words: Optional[List[Tuple[str, float]]]
    text: str
    score: float
    tokens: List[str]
    attention: Optional[numpy.ndarray]
    alignment: Optional[List[Tuple[int, int]]]

class ScoreResult:
    score: float
    log_probability: float
    token_log_probabilities: List[float]

class Translator:
    model: List[str]
    checkpoints: List[str]
    device: str
    attention: str
    target_languages: List[str]
    def __init__(
        self,
        model: Union[_Path, List[_Path], Tuple[_Path, ...]],
        checkpoint: Union[_Path, List[_Path], Tuple[_Path, ...]] = "best",
        device: str = "cpu",  # "cpu", "cuda" or "cuda:N"
        threads: int = 0,
        compute_type: Literal["default", "float32", "int8"] = "default",
        shortlist: Optional[_Path] = None,
    ) -> None: ...
    def translate_batch(
        self,
        sentences: Sequence[str],
        *,
        n_best: int = 1,
        return_attention: bool = False,
        return_alignment: bool = False,
        return_confidence: bool = False,
        prefix: Optional[Sequence[Optional[str]]] = None,
        constraints: Optional[Sequence[Union[None, str, Sequence[str]]]] = None,
        **options: Unpack[SearchOptions],
    ) -> List[TranslationResult]: ...
    def score_batch(
        self,
        sources: Sequence[str],
        targets: Sequence[str],
        *,
        length_penalty: float = 1.0,
        batch_size: int = 64,
        target_language: str = "",
    ) -> List[ScoreResult]: ...
    def translate_file(
        self,
        input: _Path,
        output: _Path,
        *,
        n_best: int = 1,
        with_scores: bool = False,
        alignment: bool = False,
        attention_dir: Optional[_Path] = None,
        prefix_file: Optional[_Path] = None,
        constraints_file: Optional[_Path] = None,
        **options: Unpack[SearchOptions],
    ) -> None: ...

def train(config: Optional[_Path] = None, **overrides: object) -> str: ...
