"""Scores over training: every checkpoint of a run scanned and cached, the emergence change point,
the law of when heads emerge, the live forecast and the local learning coefficient."""
