"""The analyze_batch stage: per batch, each run's outcome, behaviour labels and cost.
"""
