"""Challenges as data: `ChallengeDefinition` and the one loader of built-in and organiser definitions."""

from .definition import (ChallengeDefinition, EvaluationDefinition, LeaderboardDefinition, PhaseLimits,
                         ResultColumn)
from .ground_truth import check_ground_truth
from .loader import builtin_definitions, definition_digest, load_challenge

__all__ = ["ChallengeDefinition", "EvaluationDefinition", "LeaderboardDefinition", "PhaseLimits", "ResultColumn",
           "builtin_definitions", "check_ground_truth", "definition_digest", "load_challenge"]
