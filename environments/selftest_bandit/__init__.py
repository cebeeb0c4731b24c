"""Test instrument (not a benchmark): an 8-armed bandit whose score depends only on one string."""
