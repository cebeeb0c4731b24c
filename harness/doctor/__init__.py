"""``bench doctor``: what isolation, limits, devices and data evaluations get here."""
