"""Published reference programs of a family (the papers' released solutions) as labelled rows."""
