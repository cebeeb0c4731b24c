# EVOLVE-BLOCK-START
def probe():
    return {"answer": 42.0}


# EVOLVE-BLOCK-END
