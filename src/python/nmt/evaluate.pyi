# Type stubs of nmt.evaluate. The tests check them against the module.
from typing import List, Literal, Sequence, Union

class BleuScore:
    score: float
    precisions: List[float]
    counts: List[int]
    totals: List[int]
    bp: float
    sys_len: int
    ref_len: int
    signature: str
    def format(self) -> str: ...
    def __float__(self) -> float: ...

class ChrfScore:
    score: float
    signature: str
    def format(self) -> str: ...
    def __float__(self) -> float: ...

def bleu(
    hypotheses: Sequence[str],
    references: Union[Sequence[str], Sequence[Sequence[str]]],
    *,
    lowercase: bool = False,
    tokenize: Literal["13a", "none"] = "13a",
) -> BleuScore: ...
def chrf(hypotheses: Sequence[str], references: Union[Sequence[str], Sequence[Sequence[str]]]) -> ChrfScore: ...
