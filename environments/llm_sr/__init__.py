"""LLM-SR: symbolic regression of scientific equations (equation skeletons with fitted parameters)."""
