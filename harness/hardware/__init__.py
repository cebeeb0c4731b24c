"""What this machine offers (GPUs), read by the sandbox and the scorers alike."""
