"""Following attempts as they run: the evidence streams (``capture``), which TrainJob each
object is evidence for, one-shot snapshots, and the verdicts drawn from what was filed."""
