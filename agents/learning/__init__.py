"""Learning-based search components (test-time RL state reuse and friends)."""
