"""Learning agents: PACEvolve++, ThetaEvolve, TTT-Discover and Max@k on one scaffold and one RL trainer."""
