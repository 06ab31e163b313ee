"""Recovery policy as data: which action to take on which cause, within which limit."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from dispatch.model.outcome import Cause
from dispatch.model.units import format_duration, parse_duration


class Action(StrEnum):
    """What the supervisor does when an attempt ends with a cause."""

    RETRY = "retry"  # start a new attempt after the backoff, within the rule's limit
    FAIL = "fail"  # the job ends failed with the attempt's cause
    HOLD = "hold"  # the job waits for a person (``dispatch release`` or ``cancel``)


def _duration(value: Any) -> float:
    return parse_duration(value)


class Backoff(BaseModel):
    """Delay before retry number n (1-based): ``min(initial * factor**(n-1), max)`` seconds."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    initial: float = 0.0
    max: float | None = None
    factor: float = Field(default=2.0, ge=1.0)

    @field_validator("initial", "max", mode="before")
    @classmethod
    def _parse(cls, value: Any) -> Any:
        if value is None or value == 0:
            return value
        return _duration(value)

    def delay(self, retry_number: int) -> float:
        if retry_number < 1:
            raise ValueError("retry numbers start at 1")
        delay = self.initial * self.factor ** (retry_number - 1)
        return min(delay, self.max) if self.max is not None else delay

    def describe(self) -> str:
        if not self.initial:
            return "no backoff"
        cap = f", at most {format_duration(self.max)}" if self.max is not None else ""
        return f"backoff {format_duration(self.initial)} x{self.factor:g}{cap}"


class RecoveryRule(BaseModel):
    """``on`` these causes, take ``action``; a retry rule allows at most ``limit`` retries."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    on: tuple[Cause, ...]
    action: Action
    limit: int | None = Field(default=None, ge=0)
    backoff: Backoff = Backoff()

    @model_validator(mode="after")
    def _check(self) -> RecoveryRule:
        if not self.on:
            raise ValueError("`on` needs at least one cause, e.g. on: [preempted]")
        if self.action is Action.RETRY and self.limit is None:
            raise ValueError("a retry rule needs a limit (how many retries at most), e.g. limit: 3")
        if self.action is not Action.RETRY and self.limit is not None:
            raise ValueError(f"limit applies to retry rules only, not to {self.action.value!r}")
        if self.action is Action.RETRY and Cause.CANCELLED in self.on:
            raise ValueError("a cancelled job is never retried: remove 'cancelled' from this rule")
        return self


class RecoveryPolicy(BaseModel):
    """The job's rules, in order; a cause is named by at most one rule.

    ``unmatched`` is what happens on a cause that no rule names (``fail`` or ``hold``).
    A cancelled attempt always ends the job as cancelled, whatever the rules say.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    rules: tuple[RecoveryRule, ...] = ()
    unmatched: Action = Action.FAIL

    @field_validator("unmatched")
    @classmethod
    def _unmatched(cls, value: Action) -> Action:
        if value is Action.RETRY:
            raise ValueError(
                "unmatched may be 'fail' or 'hold'; name the causes to retry in a rule"
            )
        return value

    @model_validator(mode="after")
    def _each_cause_once(self) -> RecoveryPolicy:
        seen: dict[Cause, int] = {}
        for index, rule in enumerate(self.rules):
            for cause in rule.on:
                if cause in seen:
                    raise ValueError(
                        f"cause {cause.value!r} is named by rules {seen[cause]} and {index}; "
                        "name each cause in one rule only"
                    )
                seen[cause] = index
        return self

    def rule_for(self, cause: Cause) -> RecoveryRule | None:
        """The rule naming ``cause``, or None when the cause is unmatched."""
        for rule in self.rules:
            if cause in rule.on:
                return rule
        return None
