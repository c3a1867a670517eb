"""Protocol names: the three axes of Bellogín, Castells & Cantador (docs/CONVENTIONS.md#protocols).

A protocol is written ``<candidates>+<relevant>+<non-relevant>``, e.g. ``AI+AR+AN`` (full ranking) or
``AI+1R+NN100`` (the sampled protocol common in papers). ``NN`` alone means ``NN100``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from recsys_eval.errors import ConfigError, closest

CANDIDATES = ("AI", "TI", "UT")
RELEVANT = ("AR", "1R")
NONRELEVANT = ("AN", "NN")
DEFAULT_N = 100
#: One line per axis value, for listings and glossaries.
MEANINGS = {
    "AI": "candidates: every item, less the user's training items",
    "TI": "candidates: the items with a test interaction, less the user's training items",
    "UT": "candidates: the user's own test items only (overestimates precision; to compare with papers)",
    "AR": "relevant items: all of the user's relevant test items in one ranking",
    "1R": "relevant items: one ranking per relevant test item, each with the non-relevant items",
    "AN": "non-relevant items: every candidate that is not relevant",
    "NN": f"non-relevant items: a seeded uniform sample of n of them (NNn; NN alone is NN{DEFAULT_N})",
}

_NN = re.compile(r"NN(\d*)")


@dataclass(frozen=True)
class Protocol:
    """One point of the design space.

    Attributes:
        candidates: ``AI`` (every item the user has not trained on), ``TI`` (test items, less the
            user's training items) or ``UT`` (the user's own test items).
        relevant: ``AR`` (all relevant items in one ranking per user) or ``1R`` (one ranking per
            relevant item).
        nonrelevant: ``AN`` (every candidate that is not relevant) or ``NN`` (a sample of ``n``).
        n: the sample size under ``NN``; None under ``AN``.
    """

    candidates: str = "AI"
    relevant: str = "AR"
    nonrelevant: str = "AN"
    n: int | None = None

    def __post_init__(self) -> None:
        for axis, value, allowed in (
            ("candidate set", self.candidates, CANDIDATES),
            ("relevant-item selection", self.relevant, RELEVANT),
            ("non-relevant selection", self.nonrelevant, NONRELEVANT),
        ):
            if value not in allowed:
                written = f"{self.candidates}+{self.relevant}+{self.nonrelevant}"
                raise ConfigError(
                    f"unknown {axis} {value!r} in protocol {written!r}: {closest(str(value), allowed)}"
                )
        if self.nonrelevant == "NN":
            if self.n is None:
                object.__setattr__(self, "n", DEFAULT_N)
            if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 1:
                raise ConfigError(
                    f"protocol '{self.candidates}+{self.relevant}+NN{self.n}': the number of sampled "
                    f"non-relevant items must be an integer >= 1, got {self.n!r}"
                )
        elif self.n is not None:
            raise ConfigError(
                f"protocol {self.candidates}+{self.relevant}+AN takes no sample size (got n={self.n})"
            )

    @classmethod
    def parse(cls, text: str | Protocol) -> Protocol:
        """Parse ``"TI+1R+NN100"`` (axis names are case-insensitive; ``NN`` alone is ``NN100``)."""
        if isinstance(text, Protocol):
            return text
        parts = [p.strip().upper() for p in str(text).split("+")]
        if len(parts) != 3:
            raise ConfigError(
                f"protocol {text!r}: expected three parts <candidates>+<relevant>+<non-relevant>, "
                "e.g. 'AI+AR+AN' or 'AI+1R+NN100'"
            )
        candidates, relevant, nonrelevant = parts
        match = _NN.fullmatch(nonrelevant)
        if match:
            digits = match.group(1)
            return cls(candidates, relevant, "NN", int(digits) if digits else DEFAULT_N)
        if nonrelevant != "AN":
            raise ConfigError(
                f"unknown non-relevant selection {nonrelevant!r} in protocol {text!r}: "
                f"{closest(nonrelevant, ('AN', 'NN', 'NN100'))} (NN takes a positive count, e.g. NN100)"
            )
        return cls(candidates, relevant, "AN")

    @property
    def name(self) -> str:
        """The canonical name used in configs and results, e.g. ``"AI+1R+NN100"``."""
        nonrelevant = f"NN{self.n}" if self.nonrelevant == "NN" else "AN"
        return f"{self.candidates}+{self.relevant}+{nonrelevant}"

    @property
    def full_ranking(self) -> bool:
        """True when every candidate is ranked (AI/TI + AR + AN): targets are then not listed."""
        return self.candidates != "UT" and self.relevant == "AR" and self.nonrelevant == "AN"

    def __str__(self) -> str:
        return self.name
