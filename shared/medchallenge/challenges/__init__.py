"""Challenges as data: `ChallengeDefinition` and the one loader of built-in and organiser definitions."""

from .definition import (ChallengeDefinition, EvaluationDefinition, LeaderboardDefinition, PhaseLimits,
                         ResultColumn)

__all__ = ["ChallengeDefinition", "EvaluationDefinition", "LeaderboardDefinition", "PhaseLimits", "ResultColumn"]
