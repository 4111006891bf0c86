"""RadGraph F1 through the `radgraph` package (an adapter, not a re-implementation).

Used with `clinical_backend=models radgraph=1`. It needs `pip install radgraph` (which pins its own
torch/transformers ranges; use a separate environment if they clash) and the RadGraph weights already
in the Hugging Face cache, since the evaluator runs offline. The original scorer calls
`F1RadGraph(reward_level="partial")` and reads the mean reward and the per-report rewards."""

from __future__ import annotations

from typing import Any


class RadGraphScorer:
    """score(references, hypotheses) -> (mean partial reward, per-report rewards)."""

    def __init__(self, reward_level: str = "partial") -> None:
        try:
            from radgraph import F1RadGraph
        except ImportError:
            from automedbench.api import UserError

            raise UserError("radgraph=1 needs the radgraph package and its cached weights "
                            "(pip install radgraph; see plugins/report_gen/README.md)") from None
        self.scorer: Any = F1RadGraph(reward_level=reward_level)

    def score(self, references: list[str], hypotheses: list[str]) -> tuple[float, list[float]]:
        mean, rewards, *_ = self.scorer(hyps=hypotheses, refs=references)
        return float(mean), [float(r) for r in rewards]
