# Test instrument (not a benchmark): the first character of CHOICE selects one of 8 arms.
# EVOLVE-BLOCK-START
CHOICE = "a"
# EVOLVE-BLOCK-END


def choose() -> str:
    return CHOICE
